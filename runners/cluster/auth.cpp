#include "auth.hpp"

#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <sstream>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>

#include "engine/errors.hpp"

namespace tessel::cluster {

namespace {

constexpr std::size_t kMinSecretBytes = 16;
constexpr std::size_t kNonceBytes = 32;

std::string hex(const unsigned char* bytes, std::size_t size) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * size);
  for (std::size_t i = 0; i < size; ++i) {
    out += digits[bytes[i] >> 4];
    out += digits[bytes[i] & 0xf];
  }
  return out;
}

// Nonces are 32 random bytes in hex; anything else in a hello is malformed.
bool is_nonce(const std::string& text) {
  if (text.size() != 2 * kNonceBytes) return false;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

Secret Secret::from_file(const std::filesystem::path& path) {
  struct stat info{};
  if (::stat(path.c_str(), &info) != 0) throw UserError(path.string() + ": cannot read the secret file");
  if ((info.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
    throw UserError(path.string() + ": the secret file is readable by others (mode " + mode +
                    "); chmod 600 it");
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) throw UserError(path.string() + ": cannot read the secret file");
  std::string bytes = text.str();
  while (!bytes.empty() && (bytes.back() == '\n' || bytes.back() == '\r')) bytes.pop_back();
  if (bytes.size() < kMinSecretBytes)
    throw UserError(path.string() + ": the secret is " + std::to_string(bytes.size()) + " bytes; at least " +
                    std::to_string(kMinSecretBytes) + " are needed (e.g. head -c 32 /dev/urandom | base64)");
  return Secret(std::move(bytes));
}

std::string Secret::mac(std::string_view text) const {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), bytes_.data(), static_cast<int>(bytes_.size()),
           reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest, &length) == nullptr)
    throw std::runtime_error("HMAC-SHA256 failed");
  return hex(digest, length);
}

std::string Secret::derive_key(std::string_view label, std::size_t bytes) const {
  std::string key(bytes, '\0');
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> context(EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr),
                                                                     &EVP_PKEY_CTX_free);
  std::size_t length = bytes;
  if (!context || EVP_PKEY_derive_init(context.get()) <= 0 ||
      EVP_PKEY_CTX_set_hkdf_md(context.get(), EVP_sha256()) <= 0 ||
      EVP_PKEY_CTX_set1_hkdf_key(context.get(), reinterpret_cast<const unsigned char*>(bytes_.data()),
                                 static_cast<int>(bytes_.size())) <= 0 ||
      EVP_PKEY_CTX_add1_hkdf_info(context.get(), reinterpret_cast<const unsigned char*>(label.data()),
                                  static_cast<int>(label.size())) <= 0 ||
      EVP_PKEY_derive(context.get(), reinterpret_cast<unsigned char*>(key.data()), &length) <= 0 || length != bytes)
    throw std::runtime_error("HKDF-SHA256 failed");
  return key;
}

std::string random_nonce() {
  unsigned char bytes[kNonceBytes];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("no random bytes from OpenSSL");
  return hex(bytes, sizeof bytes);
}

bool same_mac(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string_view to_string(Role role) { return role == Role::agent ? "agent" : "client"; }

json ServerHandshake::challenge() const {
  return message("challenge", {{"nonce", nonce_}, {"protocol", int{kProtocolVersion}}});
}

std::optional<Role> ServerHandshake::check(const Message& hello, std::string& why) {
  if (hello.type() != "hello") throw ProtocolError("expected 'hello', got '" + hello.type() + "'");
  const std::string role = hello.text("role");
  if (role != "agent" && role != "client") throw ProtocolError("unknown role '" + role.substr(0, 32) + "'");
  peer_nonce_ = hello.text("nonce");
  if (!is_nonce(peer_nonce_)) throw ProtocolError("'nonce' in 'hello' must be 64 hex digits");
  const std::string proof = hello.text("proof");
  if (!same_mac(proof, secret_.mac("tessel-hello|" + role + "|" + nonce_ + "|" + peer_nonce_))) {
    why = "wrong secret";
    return std::nullopt;
  }
  role_ = role == "agent" ? Role::agent : Role::client;
  return role_;
}

json ServerHandshake::welcome() const {
  return message("welcome",
                 {{"proof", secret_.mac("tessel-welcome|" + std::string(to_string(role_)) + "|" + peer_nonce_ + "|" + nonce_)}});
}

json ClientHandshake::hello(const Message& challenge) {
  if (challenge.type() != "challenge") throw ProtocolError("expected 'challenge', got '" + challenge.type() + "'");
  server_nonce_ = challenge.text("nonce");
  if (!is_nonce(server_nonce_)) throw ProtocolError("'nonce' in 'challenge' must be 64 hex digits");
  const std::string role(to_string(role_));
  return message("hello", {{"role", role},
                           {"nonce", nonce_},
                           {"proof", secret_.mac("tessel-hello|" + role + "|" + server_nonce_ + "|" + nonce_)}});
}

void ClientHandshake::check(const Message& welcome) const {
  if (welcome.type() == "refused") throw ProtocolError("the scheduler refused us: " + welcome.text("reason"));
  if (welcome.type() != "welcome") throw ProtocolError("expected 'welcome', got '" + welcome.type() + "'");
  const std::string expected =
      secret_.mac("tessel-welcome|" + std::string(to_string(role_)) + "|" + nonce_ + "|" + server_nonce_);
  if (!same_mac(welcome.text("proof"), expected))
    throw ProtocolError("the scheduler could not prove it knows the secret");
}

}  // namespace tessel::cluster
