#include "connection.hpp"

#include <chrono>
#include <sstream>

#include <boost/asio/ssl/error.hpp>
#include <boost/asio/write.hpp>

#include "engine/errors.hpp"

namespace tessel::cluster {

Connection::Connection(tcp::socket socket, std::size_t max_payload, std::shared_ptr<TlsContext> tls,
                       const std::string& host)
    : socket_(std::move(socket)), tls_context_(std::move(tls)), decoder_(max_payload),
      deadline_(socket_.get_executor()) {
  boost::system::error_code error;
  const tcp::endpoint remote = socket_.remote_endpoint(error);
  peer_ = error ? "unknown peer" : remote.address().to_string() + ":" + std::to_string(remote.port());
  socket_.set_option(tcp::no_delay(true), error);  // small request/reply messages
  if (tls_context_) {
    tls_ = std::make_unique<asio::ssl::stream<tcp::socket&>>(socket_, tls_context_->native());
    tls_context_->prepare(tls_->native_handle(), host);
  } else {
    ready_ = true;
  }
}

template <typename Operation>
void Connection::with_stream(Operation&& operation) {
  if (tls_) operation(*tls_);
  else operation(socket_);
}

tcp::endpoint Connection::local_endpoint() const {
  boost::system::error_code error;
  return socket_.local_endpoint(error);
}

void Connection::start(MessageHandler on_message, CloseHandler on_close) {
  on_message_ = std::move(on_message);
  on_close_ = std::move(on_close);
  if (tls_) handshake();
  else read();
}

void Connection::handshake() {
  const auto side = tls_context_->side() == TlsContext::Side::server ? asio::ssl::stream_base::server
                                                                      : asio::ssl::stream_base::client;
  tls_->async_handshake(side, [self = shared_from_this()](boost::system::error_code error) {
    if (!self->open_) return;
    SSL* ssl = self->tls_->native_handle();
    const std::string why = error ? self->tls_context_->explain(error, ssl) : self->tls_context_->check_session(ssl);
    if (!why.empty()) {
      self->tls_refused_ = !error || error.category() == asio::error::get_ssl_category();
      self->close(why);
      return;
    }
    self->ready_ = true;
    self->read();
    if (!self->outbox_.empty() && !self->writing_) self->write();
  });
}

void Connection::read() {
  auto on_read = [self = shared_from_this()](boost::system::error_code error, std::size_t size) {
    if (!self->open_) return;
    if (error) {
      const bool eof = error == asio::error::eof || error == asio::ssl::error::stream_truncated;
      // In TLS 1.3 a client's handshake ends before the server has checked
      // its certificate: a refusal arrives as an alert on the first read.
      if (!eof && self->tls_ && !self->heard_ && error.category() == asio::error::get_ssl_category()) {
        self->tls_refused_ = true;
        self->close(self->tls_context_->explain(error, self->tls_->native_handle()));
        return;
      }
      self->close(eof ? "peer closed the connection" : error.message());
      return;
    }
    // Checked before the bytes are appended, so the shared limit is never passed.
    if (self->budget_ && self->budget_->used - self->charged_ + self->decoder_.buffered() + size >
                             self->budget_->limit) {
      self->close("unfinished frames would pass the daemon's " + std::to_string(self->budget_->limit) +
                  "-byte buffer limit");
      return;
    }
    self->decoder_.feed(std::string_view(self->buffer_.data(), size));
    const std::size_t frames = self->deliver();
    if (!self->open_) return;
    self->charge();
    // A frame's clock starts at its first byte: the deadline goes when a
    // frame completes, and a new one starts for the bytes of the next.
    if (frames > 0 && self->deadline_armed_) {
      self->deadline_armed_ = false;
      self->deadline_.cancel();
    }
    if (!self->deadline_armed_ && self->frame_timeout_ > 0 && self->decoder_.buffered() > 0) {
      std::ostringstream why;
      why << "frame not completed within " << self->frame_timeout_ << " s";
      self->arm(self->frame_timeout_, why.str());
    }
    self->read();
  };
  with_stream([&](auto& stream) { stream.async_read_some(asio::buffer(buffer_), std::move(on_read)); });
}

void Connection::expect_frame_within(double seconds, const std::string& why) { arm(seconds, why); }

void Connection::arm(double seconds, std::string why) {
  deadline_armed_ = true;
  deadline_.expires_after(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds)));
  // A weak reference: an idle connection's timer does not keep it alive.
  deadline_.async_wait([weak = weak_from_this(), why = std::move(why)](boost::system::error_code error) {
    auto self = weak.lock();
    if (error || !self || !self->deadline_armed_) return;
    self->deadline_armed_ = false;
    self->close(why);
  });
}

void Connection::charge() {
  if (!budget_) return;
  const std::size_t now = decoder_.buffered();
  budget_->used = budget_->used - charged_ + now;
  charged_ = now;
}

std::size_t Connection::deliver() {
  std::size_t frames = 0;
  try {
    while (open_ && closing_reason_.empty()) {
      std::optional<std::string> payload = decoder_.next();
      if (!payload) return frames;
      ++frames;
      heard_ = true;
      const Message message = Message::parse(*payload);
      on_message_(message);
    }
  } catch (const FrameError& e) {
    close(e.what());
  } catch (const ProtocolError& e) {
    close(e.what());
  } catch (const std::exception& e) {
    // A handler tripped over content it did not expect: this peer goes, the
    // daemon stays.
    close(std::string("cannot handle its message: ") + e.what());
  }
  return frames;
}

void Connection::send(const json& message) {
  if (!open_) return;
  outbox_.push_back(encode_frame(message.dump()));
  if (!writing_ && ready_) write();
}

void Connection::write() {
  writing_ = true;
  auto on_written = [self = shared_from_this()](boost::system::error_code error, std::size_t) {
    self->writing_ = false;
    if (!self->open_) return;
    if (error) {
      self->close(error.message());
      return;
    }
    self->outbox_.pop_front();
    if (!self->outbox_.empty())
      self->write();
    else if (!self->closing_reason_.empty())
      self->close(self->closing_reason_);
  };
  with_stream([&](auto& stream) { asio::async_write(stream, asio::buffer(outbox_.front()), std::move(on_written)); });
}

void Connection::close_after_sending(const std::string& why) {
  if (!open_) return;
  closing_reason_ = why;
  if (!writing_ && outbox_.empty()) close(why);
}

void Connection::close(const std::string& why) {
  if (!open_) return;
  open_ = false;
  boost::system::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  outbox_.clear();
  deadline_armed_ = false;
  deadline_.cancel();
  if (budget_) budget_->used -= charged_;
  charged_ = 0;
  on_message_ = nullptr;
  // The handler may drop the owner's last reference to this connection.
  CloseHandler on_close = std::move(on_close_);
  on_close_ = nullptr;
  if (on_close) on_close(why);
}

std::pair<std::string, std::uint16_t> split_host_port(const std::string& text, const std::string& what) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    throw UserError(what + " '" + text + "' must be HOST:PORT");
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port = text.substr(colon + 1);
  unsigned long value = 0;
  for (char c : port) {
    if (c < '0' || c > '9' || value > 65535) throw UserError(what + " '" + text + "': bad port '" + port + "'");
    value = value * 10 + static_cast<unsigned long>(c - '0');
  }
  if (value > 65535) throw UserError(what + " '" + text + "': bad port '" + port + "'");
  return {host, static_cast<std::uint16_t>(value)};
}

}  // namespace tessel::cluster
