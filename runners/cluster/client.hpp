// The user's side of the protocol: `tessel submit`, `jobs`, `cancel` and
// `status` open a connection (TLS unless insecure, tls.hpp), authenticate
// like an agent would (as a client), send one request and wait for its reply.
#pragma once

#include <utility>  // before Asio (asio issue #944)

#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>

#include "auth.hpp"
#include "connection.hpp"
#include "tls.hpp"

namespace tessel::cluster {

class SchedulerClient {
 public:
  // Connects and authenticates. Throws UserError when the daemon cannot be
  // reached, refuses the secret or the TLS handshake, or cannot prove it
  // knows the secret. `tls`: the default is TLS with the secret's key.
  SchedulerClient(const std::string& scheduler, Secret secret, const TlsSettings& tls = {},
                  double timeout_seconds = 10);
  ~SchedulerClient();

  // Sends a request and returns the reply; an 'error' reply throws UserError.
  Message request(const json& request);

 private:
  // Runs the io_context until a message arrives; throws UserError on close or timeout.
  Message receive();

  std::string scheduler_;
  Secret secret_;
  bool insecure_;
  double timeout_seconds_;
  asio::io_context io_;
  std::shared_ptr<Connection> connection_;
  std::optional<Message> inbox_;
  std::string closed_;
};

}  // namespace tessel::cluster
