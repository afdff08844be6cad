// Authentication by a shared secret, with HMAC-SHA256 challenge-response.
// The secret never crosses the wire; each side proves it knows the secret by
// a MAC over both sides' fresh nonces, so a recorded exchange is useless:
//
//   daemon: challenge {nonce: S}
//   peer:   hello {role, nonce: C, proof: HMAC(secret, "tessel-hello|" role "|" S "|" C)}
//   daemon: welcome {proof: HMAC(secret, "tessel-welcome|" role "|" C "|" S)}
//
// The daemon refuses (and logs) a wrong proof; the peer refuses a daemon
// whose proof is wrong, so an impostor daemon cannot collect submissions.
// MACs are compared in constant time.
//
// The exchange runs inside TLS unless the cluster is insecure (tls.hpp): TLS
// keeps the frames private; this login says the peer's role and protocol
// version, and proves the secret the same way in every TLS mode.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "frame.hpp"
#include "protocol.hpp"

namespace tessel::cluster {

class Secret {
 public:
  // Reads a secret file: at least 16 bytes (trailing newlines are dropped),
  // readable by its owner only (like ssh keys). Throws UserError otherwise.
  static Secret from_file(const std::filesystem::path& path);
  explicit Secret(std::string bytes) : bytes_(std::move(bytes)) {}

  std::string mac(std::string_view text) const;  // HMAC-SHA256, as hex
  // A key for one purpose: HKDF-SHA256 of the secret with `label` as its
  // info, `bytes` raw bytes (the TLS pre-shared key, tls.hpp).
  std::string derive_key(std::string_view label, std::size_t bytes) const;

 private:
  std::string bytes_;
};

// Fresh random bytes from OpenSSL's CSPRNG, as hex.
std::string random_nonce();
bool same_mac(std::string_view a, std::string_view b);

enum class Role { agent, client };
std::string_view to_string(Role role);

// The daemon's side of one handshake.
class ServerHandshake {
 public:
  explicit ServerHandshake(const Secret& secret) : secret_(secret), nonce_(random_nonce()) {}
  json challenge() const;
  // Checks a hello; the peer's role, or nothing (with `why`) if refused.
  // Throws ProtocolError when the hello is malformed.
  std::optional<Role> check(const Message& hello, std::string& why);
  json welcome() const;  // after a successful check

 private:
  const Secret& secret_;
  std::string nonce_;
  std::string peer_nonce_;
  Role role_ = Role::client;
};

// The agent's or client's side.
class ClientHandshake {
 public:
  ClientHandshake(const Secret& secret, Role role) : secret_(secret), role_(role), nonce_(random_nonce()) {}
  // Answers a challenge. Throws ProtocolError.
  json hello(const Message& challenge);
  // Throws ProtocolError when the daemon refused or could not prove the secret.
  void check(const Message& welcome) const;

 private:
  const Secret& secret_;
  Role role_;
  std::string nonce_;
  std::string server_nonce_;
};

}  // namespace tessel::cluster
