// TLS between the daemon, its agents and its clients (runners/cluster/tls.hpp),
// end to end with `tessel serve`, `tessel agent` and client commands on
// loopback (local_cluster.hpp). What crosses the wire is read by a relay
// between the peers and the daemon.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <mutex>

#include "local_cluster.hpp"

using namespace tessel;
using namespace tessel::cluster;
using namespace tessel::test;

namespace {

const char* kFifo = R"([scheduler]
round_seconds = 0.5
allocation = { plugin = "fifo" }
placement = { plugin = "consolidated" }
[serve]
heartbeat_seconds = 0.2
)";

// A TCP relay on loopback to `target`: every connection made to it is
// forwarded, and every byte that passes, either way, is kept.
class Relay {
 public:
  explicit Relay(const std::string& target) {
    const auto [host, port] = split_host_port(target, "target");
    target_ = sockaddr_in{};
    target_.sin_family = AF_INET;
    target_.sin_port = htons(port);
    ::inet_pton(AF_INET, host.c_str(), &target_.sin_addr);
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&local), sizeof local) == 0);
    REQUIRE(::listen(listener_, 64) == 0);
    socklen_t length = sizeof local;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&local), &length);
    address_ = "127.0.0.1:" + std::to_string(ntohs(local.sin_port));
    thread_ = std::thread([this] { run(); });
  }
  ~Relay() {
    stopping_ = true;
    thread_.join();
    ::close(listener_);
  }

  const std::string& address() const { return address_; }
  std::string captured() const {
    std::lock_guard lock(mutex_);
    return captured_;
  }

 private:
  void run() {
    std::vector<std::pair<int, int>> pairs;  // (peer, daemon)
    while (!stopping_) {
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      for (const auto& [a, b] : pairs) {
        fds.push_back({a, POLLIN, 0});
        fds.push_back({b, POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
      std::vector<std::pair<int, int>> kept;
      for (std::size_t i = 0; i < pairs.size(); ++i) {
        const auto [a, b] = pairs[i];
        bool open = forward(fds[1 + 2 * i], a, b) && forward(fds[2 + 2 * i], b, a);
        if (open) {
          kept.push_back(pairs[i]);
        } else {
          ::close(a);
          ::close(b);
        }
      }
      pairs = std::move(kept);
      if (fds[0].revents & POLLIN) {
        const int peer = ::accept(listener_, nullptr, nullptr);
        const int daemon = ::socket(AF_INET, SOCK_STREAM, 0);
        if (::connect(daemon, reinterpret_cast<const sockaddr*>(&target_), sizeof target_) == 0) {
          pairs.emplace_back(peer, daemon);
        } else {
          ::close(peer);
          ::close(daemon);
        }
      }
    }
    for (const auto& [a, b] : pairs) {
      ::close(a);
      ::close(b);
    }
  }

  // Moves what `from` has to `to`; false once either end is done.
  bool forward(const pollfd& polled, int from, int to) {
    if (!(polled.revents & (POLLIN | POLLHUP | POLLERR))) return true;
    char buffer[64 * 1024];
    const ssize_t n = ::read(from, buffer, sizeof buffer);
    if (n <= 0) return false;
    {
      std::lock_guard lock(mutex_);
      captured_.append(buffer, static_cast<std::size_t>(n));
    }
    for (ssize_t sent = 0; sent < n;) {
      const ssize_t w = ::send(to, buffer + sent, static_cast<std::size_t>(n - sent), MSG_NOSIGNAL);
      if (w <= 0) return false;
      sent += w;
    }
    return true;
  }

  int listener_ = -1;
  sockaddr_in target_{};
  std::string address_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mutex_;
  std::string captured_;
  std::thread thread_;
};

// Runs `tessel` with `args` in `dir`; fails the test (instead of hanging
// it) if it has not exited within `seconds`.
CommandResult run_within(const std::vector<std::string>& args, const fs::path& dir, double seconds) {
  static int runs = 0;
  const std::string name = "run" + std::to_string(runs++);
  std::vector<std::string> argv{tessel_exe().string()};
  argv.insert(argv.end(), args.begin(), args.end());
  const pid_t pid = spawn(argv, dir, dir / (name + ".out"), dir / (name + ".err"));
  int status = 0;
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  while (::waitpid(pid, &status, WNOHANG) != pid) {
    if (Clock::now() > deadline) {
      end_process(pid, SIGKILL);
      FAIL("tessel " << args.front() << " did not exit within " << seconds << " s:\n" << slurp(dir / (name + ".err")));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir / (name + ".out")), slurp(dir / (name + ".err"))};
}

// One submit through the relay, whose command and environment hold `marker`,
// and one agent whose connection goes through it too: the job's command and
// environment cross it twice (submitted, then launched). Returns the capture.
std::string relay_a_job(LocalCluster& cluster, const std::string& marker, const std::vector<std::string>& flags) {
  Relay relay(cluster.address());
  std::vector<std::string> agent{"agent", "--scheduler", relay.address(), "--secret-file",
                                 (cluster.dir() / "secret").string(), "--name", "relayed", "--fake-gpus", "1",
                                 "--log-dir", (cluster.dir() / "logs-relayed").string()};
  agent.insert(agent.end(), flags.begin(), flags.end());
  std::vector<std::string> argv{tessel_exe().string()};
  argv.insert(argv.end(), agent.begin(), agent.end());
  const pid_t agent_pid = spawn(argv, cluster.dir(), cluster.dir() / "relayed.out", cluster.dir() / "relayed.err");
  cluster.wait_for_nodes(1);
  std::vector<std::string> submit{"submit", "--scheduler", relay.address(), "--secret-file",
                                  (cluster.dir() / "secret").string(), "--env", "API_TOKEN=" + marker};
  submit.insert(submit.end(), flags.begin(), flags.end());
  submit.insert(submit.end(), {"--", "/bin/sh", "-c", "echo " + marker + " > seen"});
  const CommandResult submitted = run_within(submit, cluster.dir(), 60);
  REQUIRE_MESSAGE(submitted.code == 0, submitted.err);
  wait_until([&] { return cluster.all_finished(1); }, 60, "the relayed job finishes",
             [&] { return cluster.diagnostics(); });
  // The job ran with what was sent: the relay passed the bytes along.
  CHECK(slurp(cluster.dir() / "seen") == marker + "\n");
  end_process(agent_pid, SIGTERM);
  return relay.captured();
}

fs::path write_secret(const LocalCluster& cluster, const std::string& name, const std::string& text) {
  const fs::path file = cluster.dir() / name;
  std::ofstream(file) << text << "\n";
  ::chmod(file.c_str(), 0600);
  return file;
}

// An X.509 set-up made with the openssl command: a CA, certificates it
// signs (the daemon's names 127.0.0.1), and a second CA of a stranger.
struct Certificates {
  explicit Certificates(const fs::path& dir) : dir(dir) {
    fs::create_directories(dir);
    authority("ca");
    authority("rogue-ca");
    leaf("serve", "ca", "subjectAltName=IP:127.0.0.1");
    leaf("agent", "ca", "subjectAltName=DNS:agent");
    leaf("client", "ca", "subjectAltName=DNS:client");
    leaf("rogue", "rogue-ca", "subjectAltName=DNS:rogue");
  }
  fs::path pem(const std::string& name) const { return dir / (name + ".pem"); }
  fs::path key(const std::string& name) const { return dir / (name + ".key"); }
  // --tls-cert/--tls-key of `name`, --tls-ca of the cluster's CA.
  std::vector<std::string> flags(const std::string& name) const {
    return {"--tls-cert", pem(name).string(), "--tls-key", key(name).string(), "--tls-ca", pem("ca").string()};
  }

  void openssl(const std::vector<std::string>& args) const {
    std::vector<std::string> argv{"openssl"};
    argv.insert(argv.end(), args.begin(), args.end());
    const CommandResult result = run_command(argv, dir);
    REQUIRE_MESSAGE(result.code == 0, result.err);
  }
  void authority(const std::string& name) const {
    openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
             key(name).string(), "-out", pem(name).string(), "-days", "2", "-subj", "/CN=" + name});
  }
  void leaf(const std::string& name, const std::string& ca, const std::string& names) const {
    const fs::path extensions = dir / (name + ".ext");
    std::ofstream(extensions) << names << "\n";
    openssl({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
             key(name).string(), "-out", (dir / (name + ".csr")).string(), "-subj", "/CN=" + name});
    openssl({"x509", "-req", "-in", (dir / (name + ".csr")).string(), "-CA", pem(ca).string(), "-CAkey",
             key(ca).string(), "-CAcreateserial", "-out", pem(name).string(), "-days", "2", "-extfile",
             extensions.string()});
  }

  fs::path dir;
};

TlsSettings insecure() {
  TlsSettings tls;
  tls.insecure = true;
  return tls;
}

std::string x509_serve(const Certificates& certs) {
  return std::string(kFifo) + "tls_cert = \"" + certs.pem("serve").string() + "\"\ntls_key = \"" +
         certs.key("serve").string() + "\"\ntls_ca = \"" + certs.pem("ca").string() + "\"\n";
}

}  // namespace

TEST_CASE("by default a relay sees no job command or environment; with insecure = true it sees both") {
  const std::string marker = "MARKER-7f3a9c-in-command-and-env";
  {
    LocalCluster cluster(kFifo);
    cluster.start_serve();
    const std::string capture = relay_a_job(cluster, marker, {});
    CHECK(capture.size() > 1000);  // handshakes, the submission, the launch, heartbeats
    CHECK(capture.find(marker) == std::string::npos);
    CHECK(capture.find("API_TOKEN") == std::string::npos);
    CHECK(cluster.serve_log().find("insecure") == std::string::npos);
  }
  {
    LocalCluster cluster(std::string(kFifo) + "insecure = true\n");
    cluster.set_peer_tls({"--insecure"}, insecure());
    cluster.start_serve();
    const std::string capture = relay_a_job(cluster, marker, {"--insecure"});
    CHECK(capture.find(marker) != std::string::npos);
    CHECK(capture.find("API_TOKEN") != std::string::npos);
    // Each side that runs in clear says so when it starts.
    CHECK(cluster.serve_log().find("warning: [serve] insecure = true") != std::string::npos);
    CHECK(slurp(cluster.dir() / "relayed.err").find("warning: --insecure") != std::string::npos);
  }
}

TEST_CASE("a wrong secret fails the TLS handshake, named on both sides; a silent or half-sent ClientHello is dropped") {
  LocalCluster cluster(kFifo);
  cluster.start_serve();
  const fs::path wrong = write_secret(cluster, "wrong-secret", "not-the-secret-at-all-0123456789");
  const CommandResult client =
      run_within({"status", "--scheduler", cluster.address(), "--secret-file", wrong.string()}, cluster.dir(), 30);
  CHECK(client.code == 2);
  CHECK(client.err.find("TLS handshake failed") != std::string::npos);
  CHECK(client.err.find("wrong secret") != std::string::npos);
  const CommandResult agent = run_within({"agent", "--scheduler", cluster.address(), "--secret-file", wrong.string(),
                                          "--fake-gpus", "1", "--name", "intruder"},
                                         cluster.dir(), 30);
  CHECK(agent.code == 2);
  CHECK(agent.err.find("wrong secret") != std::string::npos);
  CHECK(agent.err.find("giving up") != std::string::npos);

  // TCP alone, and the first bytes of a TLS record (a ClientHello's header)
  // without the rest: both dropped at the handshake deadline.
  const auto [host, port] = split_host_port(cluster.address(), "address");
  asio::io_context io;
  tcp::socket silent(io), half(io);
  silent.connect(tcp::endpoint(asio::ip::make_address(host), port));
  half.connect(tcp::endpoint(asio::ip::make_address(host), port));
  asio::write(half, asio::buffer(std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11)));
  const timeval limit{20, 0};
  for (tcp::socket* socket : {&silent, &half}) {
    ::setsockopt(socket->native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    boost::system::error_code error;
    char byte;
    socket->read_some(asio::buffer(&byte, 1), error);
    CHECK((error == asio::error::eof || error == asio::error::connection_reset));
  }
  wait_until([&] {
    const std::string log = cluster.serve_log();
    std::size_t drops = 0;
    for (auto at = log.find("no handshake within 5 s"); at != std::string::npos;
         at = log.find("no handshake within 5 s", at + 1))
      ++drops;
    return drops == 2 && log.find("wrong secret") != std::string::npos;
  }, 20, "the daemon logs both drops and the wrong secret", [&] { return cluster.serve_log(); });
  // The daemon still serves.
  CHECK(cluster.status().at("nodes").empty());
}

TEST_CASE("TLS against plaintext, either way, is a clear error and exit 2, not a hang") {
  {
    LocalCluster cluster(kFifo);
    cluster.start_serve();
    const CommandResult plain = cluster.tessel({"status", "--insecure"});
    CHECK(plain.code == 2);
    CHECK(plain.err.find("if the scheduler requires TLS, run without --insecure") != std::string::npos);
  }
  {
    LocalCluster cluster(std::string(kFifo) + "insecure = true\n");
    cluster.start_serve();
    const CommandResult tls = run_within(
        {"status", "--scheduler", cluster.address(), "--secret-file", (cluster.dir() / "secret").string()},
        cluster.dir(), 30);
    CHECK(tls.code == 2);
    CHECK(tls.err.find("TLS handshake failed") != std::string::npos);
    CHECK(tls.err.find("connect with --insecure") != std::string::npos);
    const CommandResult agent =
        run_within({"agent", "--scheduler", cluster.address(), "--secret-file", (cluster.dir() / "secret").string(),
                    "--fake-gpus", "1", "--name", "tls-agent"},
                   cluster.dir(), 30);
    CHECK(agent.code == 2);
    CHECK(agent.err.find("connect with --insecure") != std::string::npos);
    // A raw plaintext client logs in as before.
    RawConnection raw(cluster.address(), cluster.secret(), true, true);
  }
}

TEST_CASE("X.509: a job runs end to end with certificates; a certificate from another CA is refused") {
  const TempDir pki;
  const Certificates certs(pki.path());
  LocalCluster x509(x509_serve(certs));
  TlsSettings client_tls;
  client_tls.cert = certs.pem("client");
  client_tls.key = certs.key("client");
  client_tls.ca = certs.pem("ca");
  x509.set_peer_tls(certs.flags("agent"), client_tls);
  x509.start_serve();
  x509.add_agent("a1", 2);
  x509.wait_for_nodes(1);
  x509.submit({1, 20});
  wait_until([&] { return x509.all_finished(1); }, 60, "the job finishes over X.509", [&] { return x509.diagnostics(); });

  // An agent whose certificate another CA signed: refused by the daemon.
  std::vector<std::string> rogue{"agent", "--scheduler", x509.address(), "--secret-file",
                                 (x509.dir() / "secret").string(), "--fake-gpus", "1", "--name", "rogue",
                                 "--tls-cert", certs.pem("rogue").string(), "--tls-key", certs.key("rogue").string(),
                                 "--tls-ca", certs.pem("ca").string()};
  const CommandResult refused = run_within(rogue, x509.dir(), 30);
  CHECK(refused.code == 2);
  CHECK(refused.err.find("does not accept our certificate") != std::string::npos);
  wait_until([&] { return x509.serve_log().find("certificate verify failed") != std::string::npos; }, 10,
             "the daemon logs the refused certificate", [&] { return x509.serve_log(); });
  CHECK(x509.status().at("nodes").size() == 1);

  // A client that trusts another CA refuses the daemon.
  const CommandResult distrust = run_within(
      {"status", "--scheduler", x509.address(), "--secret-file", (x509.dir() / "secret").string(), "--tls-cert",
       certs.pem("client").string(), "--tls-key", certs.key("client").string(), "--tls-ca",
       certs.pem("rogue-ca").string()},
      x509.dir(), 30);
  CHECK(distrust.code == 2);
  CHECK(distrust.err.find("certificate verify failed") != std::string::npos);
  // The daemon's certificate names 127.0.0.1, not localhost: a client that
  // dialled localhost refuses it.
  std::vector<std::string> misnamed{"status", "--scheduler",
                                    "localhost" + x509.address().substr(x509.address().rfind(':')), "--secret-file",
                                    (x509.dir() / "secret").string()};
  for (const std::string& flag : certs.flags("client")) misnamed.push_back(flag);
  const CommandResult wrong_name = run_within(misnamed, x509.dir(), 30);
  CHECK(wrong_name.code == 2);
  CHECK(wrong_name.err.find("hostname mismatch") != std::string::npos);
  // A client in the default mode (the secret's key) does not reach an X.509 daemon.
  const CommandResult psk = run_within(
      {"status", "--scheduler", x509.address(), "--secret-file", (x509.dir() / "secret").string()}, x509.dir(), 30);
  CHECK(psk.code == 2);
  CHECK(psk.err.find("TLS handshake failed") != std::string::npos);
}

TEST_CASE("TLS settings that are partial, contradictory or name bad files are refused, named, exit 2") {
  LocalCluster cluster(kFifo);  // not started: its directory and secret
  const Certificates certs(cluster.dir() / "pki");
  const std::string secret = (cluster.dir() / "secret").string();
  auto serve = [&](const std::string& serve_keys) {
    const fs::path config = cluster.dir() / "bad.toml";
    std::ofstream(config) << kFifo << serve_keys << "[output]\ndatabase = \"bad.db\"\n";
    return run_within({"serve", config.string(), "--listen", "127.0.0.1:0", "--secret-file", secret}, cluster.dir(),
                      30);
  };
  const std::string cert = "tls_cert = \"" + certs.pem("serve").string() + "\"\n";
  const std::string key = "tls_key = \"" + certs.key("serve").string() + "\"\n";
  const std::string ca = "tls_ca = \"" + certs.pem("ca").string() + "\"\n";

  CommandResult result = serve(cert);
  CHECK(result.code == 2);
  CHECK(result.err.find("'tls_key' in [serve] is missing") != std::string::npos);
  CHECK(result.err.find("'tls_ca' in [serve] is missing") != std::string::npos);
  result = serve(cert + key + ca + "insecure = true\n");
  CHECK(result.code == 2);
  CHECK(result.err.find("'insecure = true' in [serve] contradicts") != std::string::npos);
  result = serve("tls_cert = \"missing.pem\"\n" + key + ca);
  CHECK(result.code == 2);
  CHECK(result.err.find("[serve] tls_cert '") != std::string::npos);
  CHECK(result.err.find("missing.pem': cannot read the file") != std::string::npos);
  // The agent's key with the daemon's certificate.
  result = serve(cert + "tls_key = \"" + certs.key("agent").string() + "\"\n" + ca);
  CHECK(result.code == 2);
  CHECK(result.err.find("[serve] tls_key '") != std::string::npos);
  CHECK(result.err.find("is not the key of [serve] tls_cert") != std::string::npos);
  result = serve(cert + key + "tls_ca = \"" + certs.key("ca").string() + "\"\n");
  CHECK(result.code == 2);
  CHECK(result.err.find("[serve] tls_ca '") != std::string::npos);
  // Refused before a run was opened: no database was written.
  CHECK(!fs::exists(cluster.dir() / "bad.db"));

  // The same for the flags, shared by the agent and every client command.
  auto client = [&](std::vector<std::string> args) {
    args.insert(args.begin() + 1, {"--scheduler", "127.0.0.1:1", "--secret-file", secret});
    return run_within(args, cluster.dir(), 30);
  };
  result = client({"jobs", "--tls-cert", certs.pem("client").string()});
  CHECK(result.code == 2);
  CHECK(result.err.find("missing: --tls-key --tls-ca") != std::string::npos);
  result = client({"submit", "--insecure", "--tls-cert", certs.pem("client").string(), "--tls-key",
                   certs.key("client").string(), "--tls-ca", certs.pem("ca").string(), "--", "true"});
  CHECK(result.code == 2);
  CHECK(result.err.find("--insecure contradicts --tls-cert") != std::string::npos);
  result = client({"agent", "--fake-gpus", "1", "--tls-cert", certs.pem("client").string(), "--tls-key",
                   certs.key("client").string(), "--tls-ca", (cluster.dir() / "nowhere.pem").string()});
  CHECK(result.code == 2);
  CHECK(result.err.find("--tls-ca '") != std::string::npos);
  CHECK(result.err.find("nowhere.pem': cannot read the file") != std::string::npos);
  result = client({"cancel", "1", "--tls-cert", certs.pem("client").string(), "--tls-key", certs.key("serve").string(),
                   "--tls-ca", certs.pem("ca").string()});
  CHECK(result.code == 2);
  CHECK(result.err.find("is not the key of --tls-cert") != std::string::npos);
}
