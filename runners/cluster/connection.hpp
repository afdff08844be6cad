// One TCP connection carrying framed messages, on a single-threaded
// io_context. Reads feed a FrameDecoder; each whole frame is parsed into a
// Message and handed to the owner. A malformed frame or message, or a
// handler throwing ProtocolError, closes this connection only, with the
// reason given to the close handler. Writes are queued and sent in order.
//
// What a peer may make the daemon hold is bounded in one place, here, the
// same before and after authentication: a frame's announced length is
// checked against the decoder's maximum (4 KiB before authentication) as
// soon as its header is in, before the buffer grows to it; one deadline
// timer closes a connection whose owed frame does not arrive in time (the
// hello, from connect; any frame, from its first byte); and a BufferBudget
// shared by all of a daemon's connections caps the bytes of unfinished
// frames they hold together.
//
// With a TlsContext (tls.hpp) the bytes go through TLS 1.3: the handshake
// runs first, and frames queued meanwhile wait for it. The bounds above
// count the decrypted bytes, and the deadline armed by expect_frame_within
// covers the TLS handshake too, so a peer that opens TCP and sends nothing,
// or half a ClientHello, is dropped like one that owes its hello. What the
// TLS layer itself holds is bounded by OpenSSL: a record (16 KiB) and,
// during the handshake, a certificate chain (32 KiB, tls.cpp).
#pragma once

#include <utility>  // before Asio (asio issue #944)

#include <array>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>

#include "frame.hpp"
#include "protocol.hpp"
#include "tls.hpp"

namespace tessel::cluster {

namespace asio = boost::asio;
using asio::ip::tcp;

// Bytes of unfinished frames held by all the connections that share it.
struct BufferBudget {
  std::size_t limit = 0;
  std::size_t used = 0;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using MessageHandler = std::function<void(const Message&)>;
  using CloseHandler = std::function<void(const std::string& why)>;

  // `tls` null: plaintext (an insecure cluster). `host`: the daemon's name
  // or address as the client dialled it, which its certificate must name.
  Connection(tcp::socket socket, std::size_t max_payload, std::shared_ptr<TlsContext> tls,
             const std::string& host = "");

  // Starts reading. Handlers are dropped when the connection closes.
  void start(MessageHandler on_message, CloseHandler on_close);
  void send(const json& message);
  // Closes now (queued frames are dropped); the close handler runs once.
  void close(const std::string& why);
  // Sends what is queued, then closes: for a last word such as 'refused'.
  void close_after_sending(const std::string& why);
  void set_max_payload(std::size_t bytes) { decoder_.set_max_payload(bytes); }
  // From now on a frame must complete within `seconds` of its first byte,
  // or the connection closes (0: no limit, the default).
  void set_frame_timeout(double seconds) { frame_timeout_ = seconds; }
  // Counts this connection's unfinished bytes in `budget`; a read that
  // would take it past its limit closes the connection.
  void set_budget(std::shared_ptr<BufferBudget> budget) { budget_ = std::move(budget); }
  // A whole frame must arrive within `seconds` from now, or the connection
  // closes with `why` (the hello after connect).
  void expect_frame_within(double seconds, const std::string& why);

  bool is_open() const { return open_; }
  // Whether a frame has arrived yet: a peer that hangs up before its first
  // one may speak another transport (TLS against plaintext).
  bool heard() const { return heard_; }
  // Whether the TLS handshake failed on its merits (a wrong key or
  // certificate, a peer without TLS), not because the connection broke.
  bool tls_refused() const { return tls_refused_; }
  const std::string& peer() const { return peer_; }
  tcp::endpoint local_endpoint() const;

 private:
  void handshake();
  void read();
  // Hands on the whole frames; how many.
  std::size_t deliver();
  void write();
  void arm(double seconds, std::string why);
  // Charges the budget for what the decoder holds now.
  void charge();


  // Reads and writes go through tls_ when there is one, else the socket.
  template <typename Operation>
  void with_stream(Operation&& operation);

  tcp::socket socket_;
  std::shared_ptr<TlsContext> tls_context_;
  std::unique_ptr<asio::ssl::stream<tcp::socket&>> tls_;
  bool ready_ = false;  // the TLS handshake is done (always, in plaintext)
  bool heard_ = false;
  bool tls_refused_ = false;
  FrameDecoder decoder_;
  asio::steady_timer deadline_;
  bool deadline_armed_ = false;
  double frame_timeout_ = 0;
  std::shared_ptr<BufferBudget> budget_;
  std::size_t charged_ = 0;  // this connection's part of budget_->used
  // Not zeroed: an idle connection touches only the pages its reads fill.
  std::array<char, 64 * 1024> buffer_;
  std::deque<std::string> outbox_;
  bool writing_ = false;
  bool open_ = true;
  std::string closing_reason_;  // set by close_after_sending
  std::string peer_;
  MessageHandler on_message_;
  CloseHandler on_close_;
};

// "HOST:PORT" to its parts; throws UserError naming `what` when malformed.
std::pair<std::string, std::uint16_t> split_host_port(const std::string& text, const std::string& what);

}  // namespace tessel::cluster
