#include "tls.hpp"

#include <cstring>
#include <fstream>

#include <boost/asio/error.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/error.hpp>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "engine/errors.hpp"

namespace tessel::cluster {

namespace asio = boost::asio;

namespace {

// The pre-shared key's session: TLS_AES_128_GCM_SHA256, under one identity
// for the whole cluster. A PSK is bound to its hash: the server skips it
// when the suite it picks hashes otherwise, so PSK mode offers only the
// SHA-256 suites (kPskSuites).
constexpr unsigned char kPskCipher[2] = {0x13, 0x01};
constexpr char kPskSuites[] = "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256";
constexpr char kPskIdentity[] = "tessel";
constexpr char kPskLabel[] = "tessel TLS 1.3 external PSK v1";
constexpr std::size_t kPskBytes = 32;
constexpr long kMaxCertificateChainBytes = 32 * 1024;

// Where a context's callbacks find their TlsContext. Not SSL_CTX's app data,
// which asio's context owns (its verify callback).
int context_index() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

const TlsContext& owner(SSL* ssl) {
  return *static_cast<const TlsContext*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), context_index()));
}

// A fresh session holding the key; OpenSSL takes ownership of it.
SSL_SESSION* psk_session(SSL* ssl) {
  const std::string& key = owner(ssl).psk();
  const SSL_CIPHER* cipher = SSL_CIPHER_find(ssl, kPskCipher);
  SSL_SESSION* session = SSL_SESSION_new();
  if (cipher == nullptr || session == nullptr ||
      SSL_SESSION_set1_master_key(session, reinterpret_cast<const unsigned char*>(key.data()), key.size()) != 1 ||
      SSL_SESSION_set_cipher(session, cipher) != 1 || SSL_SESSION_set_protocol_version(session, TLS1_3_VERSION) != 1) {
    SSL_SESSION_free(session);
    return nullptr;
  }
  return session;
}

int use_psk(SSL* ssl, const EVP_MD* md, const unsigned char** id, std::size_t* id_length, SSL_SESSION** session) {
  *session = psk_session(ssl);
  if (*session == nullptr) return 0;
  // Called again after a HelloRetryRequest with the hash chosen by then.
  if (md != nullptr && md != SSL_CIPHER_get_handshake_digest(SSL_SESSION_get0_cipher(*session))) {
    SSL_SESSION_free(*session);
    *session = nullptr;
    return 1;
  }
  *id = reinterpret_cast<const unsigned char*>(kPskIdentity);
  *id_length = sizeof kPskIdentity - 1;
  return 1;
}

int find_psk(SSL* ssl, const unsigned char* id, std::size_t id_length, SSL_SESSION** session) {
  *session = nullptr;
  // An unknown identity: no key, and with no certificate to fall back on
  // the handshake fails.
  if (id_length != sizeof kPskIdentity - 1 || std::memcmp(id, kPskIdentity, id_length) != 0) return 1;
  *session = psk_session(ssl);
  return *session != nullptr ? 1 : 0;
}

// OpenSSL's error queue, as one line.
std::string openssl_errors() {
  std::string text;
  while (const unsigned long code = ERR_get_error()) {
    char line[256];
    ERR_error_string_n(code, line, sizeof line);
    text += (text.empty() ? "" : "; ") + std::string(line);
  }
  return text.empty() ? "unknown OpenSSL error" : text;
}

void readable(const std::filesystem::path& path, const std::string& name) {
  std::ifstream in(path);
  if (!in) throw UserError(name + " '" + path.string() + "': cannot read the file");
}

}  // namespace

void TlsSettings::check() const {
  const bool any = !cert.empty() || !key.empty() || !ca.empty();
  if (insecure && any)
    throw UserError(insecure_name + " contradicts " + names[0] + "/" + names[1] + "/" + names[2] +
                    ": plaintext or TLS, not both");
  if (any && (cert.empty() || key.empty() || ca.empty())) {
    std::string missing;
    if (cert.empty()) missing += " " + names[0];
    if (key.empty()) missing += " " + names[1];
    if (ca.empty()) missing += " " + names[2];
    throw UserError("X.509 TLS needs " + names[0] + ", " + names[1] + " and " + names[2] + " together; missing:" +
                    missing);
  }
}

TlsContext::TlsContext(const TlsSettings& settings, const Secret& secret, Side side)
    : context_(side == Side::server ? asio::ssl::context::tls_server : asio::ssl::context::tls_client),
      side_(side), x509_(settings.x509()) {
  settings.check();
  SSL_CTX* native = context_.native_handle();
  SSL_CTX_set_ex_data(native, context_index(), this);
  SSL_CTX_set_min_proto_version(native, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(native, TLS1_3_VERSION);
  // Frames carry their own lengths, so a peer that closes without
  // close_notify cannot truncate one unseen: its end reads as a plain EOF.
  SSL_CTX_set_options(native, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_TICKET);
  // No resumption: every connection runs a full handshake, so the tickets
  // a TLS 1.3 server sends by default would be bytes for nothing.
  SSL_CTX_set_num_tickets(native, 0);
  // An idle connection holds no record buffers (most agents, between heartbeats).
  SSL_CTX_set_mode(native, SSL_MODE_RELEASE_BUFFERS);
  // What a peer may make the other hold before it is authenticated: a
  // certificate chain of 32 KiB at most (OpenSSL's default is 100 KiB).
  SSL_CTX_set_max_cert_list(native, kMaxCertificateChainBytes);
  // Both sides verify a certificate if one is offered; in PSK mode none is
  // trusted, so a handshake that does not use the key fails.
  SSL_CTX_set_verify(native, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  // A server that verifies peers accepts a PSK (a "resumed" session) only in
  // a named session context. (The client's must stay empty, as the PSK
  // session's is.)
  static constexpr unsigned char kSessionContext[] = "tessel";
  if (side == Side::server) SSL_CTX_set_session_id_context(native, kSessionContext, sizeof kSessionContext - 1);
  if (!x509_) {
    psk_ = secret.derive_key(kPskLabel, kPskBytes);
    SSL_CTX_set_ciphersuites(native, kPskSuites);
    if (side == Side::client) SSL_CTX_set_psk_use_session_callback(native, use_psk);
    else SSL_CTX_set_psk_find_session_callback(native, find_psk);
    return;
  }
  readable(settings.cert, settings.names[0]);
  readable(settings.key, settings.names[1]);
  readable(settings.ca, settings.names[2]);
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(native, settings.cert.c_str()) != 1)
    throw UserError(settings.names[0] + " '" + settings.cert.string() + "': not a PEM certificate: " + openssl_errors());
  // OpenSSL checks the key against the certificate as it loads it.
  if (SSL_CTX_use_PrivateKey_file(native, settings.key.c_str(), SSL_FILETYPE_PEM) != 1) {
    if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH)
      throw UserError(settings.names[1] + " '" + settings.key.string() + "' is not the key of " + settings.names[0] +
                      " '" + settings.cert.string() + "'");
    throw UserError(settings.names[1] + " '" + settings.key.string() + "': not a PEM private key: " + openssl_errors());
  }
  if (SSL_CTX_load_verify_locations(native, settings.ca.c_str(), nullptr) != 1)
    throw UserError(settings.names[2] + " '" + settings.ca.string() + "': no PEM certificate in it: " +
                    openssl_errors());
}

void TlsContext::prepare(SSL* ssl, const std::string& host) const {
  if (side_ != Side::client || !x509_) return;
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  boost::system::error_code not_ip;
  asio::ip::make_address(host, not_ip);
  if (!not_ip) {
    X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
  } else {
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
    SSL_set_tlsext_host_name(ssl, host.c_str());
  }
}

std::string TlsContext::check_session(SSL* ssl) const {
  if (!x509_) {
    // An external PSK session counts as resumed; anything else did not use the key.
    if (SSL_session_reused(ssl) != 1) return "the TLS handshake did not use the shared secret's key";
    return "";
  }
  if (SSL_get0_peer_certificate(ssl) == nullptr || SSL_get_verify_result(ssl) != X509_V_OK)
    return "the peer's certificate was not verified";
  return "";
}

std::string TlsContext::explain(const boost::system::error_code& error, SSL* ssl) const {
  std::string text = "TLS handshake failed: " + error.message();
  const bool client = side_ == Side::client;
  std::string hint;
  if (error == asio::error::eof || error == asio::error::connection_reset ||
      error == asio::ssl::error::stream_truncated) {
    hint = client ? "the scheduler hung up; if it runs with [serve] insecure = true, connect with --insecure"
                  : "the peer hung up";
  } else if (error.category() == asio::error::get_ssl_category()) {
    switch (ERR_GET_REASON(static_cast<unsigned long>(error.value()))) {
      case SSL_R_WRONG_VERSION_NUMBER:
      case SSL_R_PACKET_LENGTH_TOO_LONG:
        hint = client ? "the scheduler does not speak TLS; if it runs with [serve] insecure = true, connect with "
                        "--insecure"
                      : "the peer does not speak TLS (an agent or client run with --insecure?)";
        break;
      case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
      case SSL_R_BINDER_DOES_NOT_VERIFY:
        hint = "wrong secret: the key derived from the shared secret differs";
        break;
      case SSL_R_SSLV3_ALERT_ILLEGAL_PARAMETER:  // how OpenSSL answers a PSK binder that does not verify
        if (!x509_) hint = "wrong secret: the scheduler did not accept the key derived from ours";
        break;
      case SSL_R_CERTIFICATE_VERIFY_FAILED:
        text += " (" + std::string(X509_verify_cert_error_string(SSL_get_verify_result(ssl))) + ")";
        hint = x509_ ? (client ? "the scheduler's certificate is not signed by our CA or does not name its address"
                               : "the peer's certificate is not signed by [serve] tls_ca")
                     : "the other side uses X.509 certificates; give this side --tls-cert/--tls-key/--tls-ca too";
        break;
      case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
      case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
      case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
      case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
        hint = client ? "the scheduler does not accept our certificate (not signed by its tls_ca?)"
                      : "the peer does not accept our certificate";
        break;
      case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
      case SSL_R_NO_SHARED_CIPHER:
      case SSL_R_NO_SUITABLE_SIGNATURE_ALGORITHM:
        hint = "do both sides use the same TLS mode (the shared secret's key, or X.509 certificates)?";
        break;
      default: break;
    }
  }
  return hint.empty() ? text : text + "; " + hint;
}

std::shared_ptr<TlsContext> make_tls(const TlsSettings& settings, const Secret& secret, TlsContext::Side side) {
  settings.check();
  if (settings.insecure) return nullptr;
  return std::make_shared<TlsContext>(settings, secret, side);
}

}  // namespace tessel::cluster
