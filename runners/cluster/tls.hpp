// TLS 1.3 for every connection between the daemon, its agents and its
// clients (OpenSSL 3, through Boost.Asio's ssl::stream in connection.hpp).
//
// Two ways to authenticate the TLS handshake, one per cluster:
//   - the default: an external pre-shared key, HKDF-SHA256 of the shared
//     secret under a fixed label. Only a holder of the secret completes the
//     handshake, on both sides (a wrong key fails the PSK binder); no
//     certificate is involved, and one that is offered instead is refused.
//     The key exchange is still (EC)DHE, so a recorded session stays
//     unreadable to whoever later learns the secret.
//   - X.509 ([serve] tls_cert/tls_key/tls_ca, --tls-cert/--tls-key/--tls-ca):
//     mutual; the daemon requires a peer certificate signed by its CA, and
//     agents and clients verify the daemon's against theirs, including the
//     scheduler's host name or IP address from --scheduler.
// Plaintext only when asked for ([serve] insecure = true, --insecure).
//
// Either way the HMAC login of auth.hpp runs inside the TLS session: it is
// what says a peer's role (agent or client) and protocol version, and in
// X.509 mode it keeps the shared secret as what authorises a peer, the
// certificate being what authenticates its machine.
#pragma once

#include <utility>  // before Asio (asio issue #944)

#include <array>
#include <filesystem>
#include <memory>
#include <string>

#include <boost/asio/ssl/context.hpp>

#include "auth.hpp"

namespace tessel::cluster {

struct TlsSettings {
  bool insecure = false;
  // All three (X.509) or none (the pre-shared key).
  std::filesystem::path cert, key, ca;
  // How the user named each file, for errors: a flag or a config field.
  std::array<std::string, 3> names{"--tls-cert", "--tls-key", "--tls-ca"};
  std::string insecure_name = "--insecure";

  bool x509() const { return !cert.empty(); }
  // Throws UserError for partial X.509 settings, or for insecure with them.
  void check() const;
};

class TlsContext {
 public:
  enum class Side { server, client };

  // Reads and checks the certificate files; throws UserError naming the
  // field or flag of a file that is missing, unreadable or does not match.
  TlsContext(const TlsSettings& settings, const Secret& secret, Side side);
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  boost::asio::ssl::context& native() { return context_; }
  Side side() const { return side_; }
  bool x509() const { return x509_; }
  // Per connection, before its handshake: a client checks that the
  // daemon's certificate names `host`.
  void prepare(SSL* ssl, const std::string& host) const;
  // After a handshake: empty, or why the session is not authenticated the
  // way this cluster requires.
  std::string check_session(SSL* ssl) const;
  // A failed handshake's error, with what it most likely means.
  std::string explain(const boost::system::error_code& error, SSL* ssl) const;

  // The pre-shared key: 32 bytes.
  const std::string& psk() const { return psk_; }

 private:
  boost::asio::ssl::context context_;
  Side side_;
  bool x509_;
  std::string psk_;
};

// The settings' context, or null when they say insecure. Throws UserError.
std::shared_ptr<TlsContext> make_tls(const TlsSettings& settings, const Secret& secret, TlsContext::Side side);

}  // namespace tessel::cluster
