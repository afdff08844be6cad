#include "connection.hpp"

#include <chrono>
#include <sstream>

#include <boost/asio/write.hpp>

#include "engine/errors.hpp"

namespace tessel::cluster {

Connection::Connection(tcp::socket socket, std::size_t max_payload)
    : socket_(std::move(socket)), decoder_(max_payload), deadline_(socket_.get_executor()) {
  boost::system::error_code error;
  const tcp::endpoint remote = socket_.remote_endpoint(error);
  peer_ = error ? "unknown peer" : remote.address().to_string() + ":" + std::to_string(remote.port());
  socket_.set_option(tcp::no_delay(true), error);  // small request/reply messages
}

tcp::endpoint Connection::local_endpoint() const {
  boost::system::error_code error;
  return socket_.local_endpoint(error);
}

void Connection::start(MessageHandler on_message, CloseHandler on_close) {
  on_message_ = std::move(on_message);
  on_close_ = std::move(on_close);
  read();
}

void Connection::read() {
  socket_.async_read_some(asio::buffer(buffer_), [self = shared_from_this()](boost::system::error_code error,
                                                                             std::size_t size) {
    if (!self->open_) return;
    if (error) {
      self->close(error == asio::error::eof ? "peer closed the connection" : error.message());
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
  });
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
  if (!writing_) write();
}

void Connection::write() {
  writing_ = true;
  asio::async_write(socket_, asio::buffer(outbox_.front()),
                    [self = shared_from_this()](boost::system::error_code error, std::size_t) {
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
                    });
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
