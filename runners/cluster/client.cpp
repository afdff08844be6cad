#include "client.hpp"

#include <boost/asio/connect.hpp>

#include "engine/errors.hpp"

namespace tessel::cluster {

SchedulerClient::SchedulerClient(const std::string& scheduler, Secret secret, const TlsSettings& tls,
                                 double timeout_seconds)
    : scheduler_(scheduler), secret_(std::move(secret)), insecure_(tls.insecure), timeout_seconds_(timeout_seconds) {
  const auto [host, port] = split_host_port(scheduler, "--scheduler");
  std::shared_ptr<TlsContext> context = make_tls(tls, secret_, TlsContext::Side::client);
  boost::system::error_code error;
  tcp::resolver resolver(io_);
  const auto endpoints = resolver.resolve(host, std::to_string(port), error);
  tcp::socket socket(io_);
  if (!error) asio::connect(socket, endpoints, error);
  if (error) throw UserError("cannot reach the scheduler at " + scheduler + ": " + error.message());
  connection_ = std::make_shared<Connection>(std::move(socket), kMaxHandshakeFrameBytes, std::move(context), host);
  connection_->start([this](const Message& m) { inbox_ = m; },
                     [this](const std::string& why) { closed_ = why.empty() ? "connection closed" : why; });
  ClientHandshake handshake(secret_, Role::client);
  try {
    connection_->send(handshake.hello(receive()));
    handshake.check(receive());
  } catch (const ProtocolError& e) {
    throw UserError(scheduler + ": " + e.what());
  }
  connection_->set_max_payload(kMaxFrameBytes);
}

SchedulerClient::~SchedulerClient() {
  if (connection_) connection_->close("done");
}

Message SchedulerClient::receive() {
  inbox_.reset();
  io_.restart();
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_seconds_));
  while (!inbox_ && closed_.empty()) {
    if (io_.run_one_until(deadline) == 0) throw UserError(scheduler_ + ": no reply within the timeout");
  }
  if (!inbox_) {
    // A TLS daemon waits for a ClientHello that a plaintext client never sends.
    if (insecure_ && !connection_->heard())
      throw UserError(scheduler_ + ": " + closed_ + " before its challenge; if the scheduler requires TLS, run without --insecure");
    throw UserError(scheduler_ + ": " + closed_);
  }
  return *std::exchange(inbox_, std::nullopt);
}

Message SchedulerClient::request(const json& request) {
  connection_->send(request);
  Message reply = receive();
  if (reply.type() == "error") throw UserError(reply.text("message"));
  return reply;
}

}  // namespace tessel::cluster
