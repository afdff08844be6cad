// One TCP connection carrying framed messages, on a single-threaded
// io_context. Reads feed a FrameDecoder; each whole frame is parsed into a
// Message and handed to the owner. A malformed frame or message, or a
// handler throwing ProtocolError, closes this connection only, with the
// reason given to the close handler. Writes are queued and sent in order.
#pragma once

#include <utility>  // before Asio (asio issue #944)

#include <array>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/ip/tcp.hpp>

#include "frame.hpp"
#include "protocol.hpp"

namespace tessel::cluster {

namespace asio = boost::asio;
using asio::ip::tcp;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using MessageHandler = std::function<void(const Message&)>;
  using CloseHandler = std::function<void(const std::string& why)>;

  Connection(tcp::socket socket, std::size_t max_payload);

  // Starts reading. Handlers are dropped when the connection closes.
  void start(MessageHandler on_message, CloseHandler on_close);
  void send(const json& message);
  // Closes now (queued frames are dropped); the close handler runs once.
  void close(const std::string& why);
  // Sends what is queued, then closes: for a last word such as 'refused'.
  void close_after_sending(const std::string& why);
  void set_max_payload(std::size_t bytes) { decoder_.set_max_payload(bytes); }

  bool is_open() const { return open_; }
  const std::string& peer() const { return peer_; }
  tcp::endpoint local_endpoint() const;

 private:
  void read();
  void deliver();
  void write();

  tcp::socket socket_;
  FrameDecoder decoder_;
  std::array<char, 64 * 1024> buffer_{};
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
