// A daemon and its agents on loopback, as `tessel serve` and `tessel agent`
// processes in a temporary directory, for the tests of real nodes and of
// the daemon's recovery. Tests wait for conditions (polling the daemon or the
// database), never for fixed times.
#pragma once

#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/socket.h>

#include <boost/asio/read.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/write.hpp>

#include "auth.hpp"
#include "client.hpp"
#include "frame.hpp"
#include "support.hpp"
#include "tls.hpp"

extern char** environ;

namespace tessel::test {

using cluster::json;
using cluster::SchedulerClient;
using cluster::Secret;
using cluster::TlsSettings;

using Clock = std::chrono::steady_clock;

inline std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline fs::path train_exe() { return std::getenv("TESSEL_EXAMPLE_TRAIN"); }

// Polls `condition` every 50 ms for up to `seconds`; on a timeout the
// failure shows `context()` (the daemon's log, say).
inline void wait_until(const std::function<bool()>& condition, double seconds, const std::string& what,
                const std::function<std::string()>& context = {}) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  while (!condition()) {
    if (Clock::now() > deadline) FAIL("timed out waiting until " << what << (context ? "\n" + context() : ""));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

inline pid_t spawn(const std::vector<std::string>& argv, const fs::path& cwd, const fs::path& out, const fs::path& err) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  std::vector<std::string> args = argv;
  std::vector<char*> raw;
  for (auto& a : args) raw.push_back(a.data());
  raw.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, raw[0], &actions, nullptr, raw.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE(rc == 0);
  return pid;
}

// Stops a child: `signal`, then SIGKILL if it has not exited in 10 s.
inline void end_process(pid_t pid, int signal) {
  if (pid <= 0) return;
  ::kill(pid, signal);
  for (int i = 0; i < 200; ++i) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

// A zombie (dead, not yet reaped by whoever inherited it) counts as dead.
inline bool process_alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z' && text[paren + 2] != 'X';
}

// A raw connection to the daemon, for peers that misbehave on purpose: TLS
// with the secret's key (plaintext given `insecure`), the daemon's challenge
// read and, when `login`, answered as a client's. A daemon that never
// answers or hangs up fails the test instead of hanging it.
class RawConnection {
 public:
  RawConnection(const std::string& address, const Secret& secret, bool login, bool insecure = false)
      : socket_(io_) {
    TlsSettings settings;
    settings.insecure = insecure;
    tls_ = cluster::make_tls(settings, secret, cluster::TlsContext::Side::client);
    const auto [host, port] = cluster::split_host_port(address, "address");
    socket_.connect(cluster::tcp::endpoint(cluster::asio::ip::make_address(host), port));
    const timeval limit{10, 0};
    ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    if (tls_) {
      tls_stream_.emplace(socket_, tls_->native());
      tls_stream_->handshake(cluster::asio::ssl::stream_base::client);
    }
    const cluster::Message challenge = receive();
    if (login) {
      cluster::ClientHandshake handshake(secret, cluster::Role::client);
      write(cluster::encode_frame(handshake.hello(challenge).dump()));
      handshake.check(receive());
    }
  }

  // The daemon's next message; a daemon silent for 10 s fails the test.
  cluster::Message receive() {
    char buffer[4096];
    for (;;) {
      if (auto frame = decoder_.next()) return cluster::Message::parse(*frame);
      const std::size_t n = with_stream([&](auto& s) { return s.read_some(cluster::asio::buffer(buffer)); });
      decoder_.feed(std::string_view(buffer, n));
    }
  }

  // True if all of `bytes` went out.
  bool write(const std::string& bytes) {
    boost::system::error_code error;
    with_stream([&](auto& s) { return cluster::asio::write(s, cluster::asio::buffer(bytes), error); });
    return !error;
  }
  // Blocks until the daemon hangs up; true if it did.
  bool hung_up() {
    boost::system::error_code error;
    char byte;
    with_stream([&](auto& s) { return s.read_some(cluster::asio::buffer(&byte, 1), error); });
    return error == cluster::asio::error::eof || error == cluster::asio::error::connection_reset ||
           error == cluster::asio::ssl::error::stream_truncated;
  }

 private:
  template <typename Operation>
  std::size_t with_stream(Operation&& operation) {
    if (tls_stream_) return operation(*tls_stream_);
    return operation(socket_);
  }

  cluster::asio::io_context io_;
  std::shared_ptr<cluster::TlsContext> tls_;
  cluster::tcp::socket socket_;
  std::optional<cluster::asio::ssl::stream<cluster::tcp::socket&>> tls_stream_;
  cluster::FrameDecoder decoder_{cluster::kMaxFrameBytes};
};

struct JobSpecForTest {
  int gpus = 1;
  int iterations = 100;
  int min_gpus = 0, max_gpus = 0;  // elastic when set
};

// A daemon and its agents in a temporary directory.
class LocalCluster {
 public:
  // `database`: relative to dir(); its folder is created (a test may mount a
  // small disk there before start_serve).
  explicit LocalCluster(const std::string& settings, const std::string& database = "cluster.db") : database_(database) {
    secret_ = dir_.write("secret", "a-shared-secret-for-the-tests-0123456789\n");
    ::chmod(secret_.c_str(), 0600);
    fs::create_directories((dir_.path() / database).parent_path());
    config_ = dir_.write("serve.toml", settings + "\n[output]\ndatabase = \"" + database + "\"\ndecisions = true\n");
  }
  ~LocalCluster() {
    for (auto& [name, pid] : agents_) end_process(pid, SIGTERM);
    end_process(serve_, SIGTERM);
  }

  const fs::path& dir() const { return dir_.path(); }
  fs::path db() const { return dir_.path() / database_; }
  const std::string& address() const { return address_; }
  std::string serve_log() const { return slurp(dir_.path() / "serve.err"); }
  pid_t serve_pid() const { return serve_; }

  void start_serve(const std::string& listen = "127.0.0.1:0") {
    std::ofstream(dir_.path() / "serve.out", std::ios::trunc).close();
    serve_ = spawn({tessel_exe().string(), "serve", config_.string(), "--listen", listen, "--secret-file",
                    secret_.string()},
                   dir_.path(), dir_.path() / "serve.out", dir_.path() / "serve.err");
    std::smatch match;
    std::string out;
    wait_until([&] {
      out = slurp(dir_.path() / "serve.out");
      return std::regex_search(out, match, std::regex("listening on (127\\.0\\.0\\.1:[0-9]+)\n"));
    }, 10, "serve listens");
    address_ = match[1];
  }
  void kill_serve() {
    ::kill(serve_, SIGKILL);
    ::waitpid(serve_, nullptr, 0);
    serve_ = -1;
  }

  // How agents, `tessel` client commands and request() reach the daemon,
  // when not by the default TLS (X.509 or --insecure): their flags and the
  // same as settings.
  void set_peer_tls(std::vector<std::string> flags, TlsSettings tls) {
    peer_flags_ = std::move(flags);
    peer_tls_ = std::move(tls);
  }

  // `scheduler`: where the agent connects (a relay, say); empty: the daemon.
  void add_agent(const std::string& name, int gpus = 4, const std::string& scheduler = "") {
    std::vector<std::string> args{tessel_exe().string(), "agent", "--scheduler", scheduler.empty() ? address_ : scheduler,
                                  "--secret-file", secret_.string(), "--name", name, "--fake-gpus", std::to_string(gpus),
                                  "--log-dir", (dir_.path() / ("logs-" + name)).string()};
    args.insert(args.end(), peer_flags_.begin(), peer_flags_.end());
    agents_[name] = spawn(args, dir_.path(), dir_.path() / (name + ".out"), dir_.path() / (name + ".err"));
  }
  pid_t agent_pid(const std::string& name) const { return agents_.at(name); }
  void kill_agent(const std::string& name) {
    ::kill(agents_.at(name), SIGKILL);
    ::waitpid(agents_.at(name), nullptr, 0);
    agents_.erase(name);
  }
  void wait_for_nodes(std::size_t count) {
    wait_until([&] {
      std::size_t up = 0;
      const json nodes = status().at("nodes");
      for (const json& node : nodes) up += node.at("connected").get<bool>();
      return up == count;
    }, 20, std::to_string(count) + " agents are connected");
  }

  Secret secret() const { return Secret::from_file(secret_); }
  json request(const json& message) { return SchedulerClient(address_, secret(), peer_tls_).request(message).body(); }
  json status() { return request(cluster::message("status")); }
  json jobs() { return request(cluster::message("jobs")).at("jobs"); }

  // Submits the example job through `tessel submit`; returns its id.
  int submit(const JobSpecForTest& job, int checkpoint_every = 10, int stop_ms = 0) {
    const int n = submitted_++;
    const fs::path workdir = dir_.path() / "work" / ("j" + std::to_string(n));
    fs::create_directories(workdir);
    std::vector<std::string> args{"submit", "--gpus", std::to_string(job.gpus), "--iterations",
                                  std::to_string(job.iterations), "--workdir", workdir.string(), "--name",
                                  "train" + std::to_string(n), "--grace-seconds", "2"};
    if (job.min_gpus > 0)
      args.insert(args.end(), {"--min-gpus", std::to_string(job.min_gpus), "--max-gpus", std::to_string(job.max_gpus)});
    args.insert(args.end(), {"--", train_exe().string(), "--iterations", std::to_string(job.iterations), "--sleep-ms",
                             "20", "--checkpoint-every", std::to_string(checkpoint_every), "--stop-ms",
                             std::to_string(stop_ms)});
    const CommandResult result = tessel(args);
    REQUIRE_MESSAGE(result.code == 0, result.err);
    std::smatch match;
    REQUIRE(std::regex_search(result.out, match, std::regex("submitted job ([0-9]+)")));
    return std::stoi(match[1]);
  }

  CommandResult tessel(std::vector<std::string> args) {
    args.insert(args.begin() + 1, {"--scheduler", address_, "--secret-file", secret_.string()});
    args.insert(args.begin() + 5, peer_flags_.begin(), peer_flags_.end());
    return run_tessel(args, dir_.path());
  }

  // What a failed wait shows: the daemon's log and its jobs.
  std::string diagnostics() {
    std::string text = "--- serve log:\n" + serve_log();
    for (const auto& entry : fs::directory_iterator(dir_.path()))
      if (entry.path().extension() == ".err" && entry.path().filename() != "serve.err")
        text += "--- " + entry.path().filename().string() + ":\n" + slurp(entry.path());
    try {
      text += "--- jobs:\n" + jobs().dump();
    } catch (const std::exception& e) {
      text += std::string("--- jobs: ") + e.what();
    }
    return text;
  }

  bool all_finished(std::size_t count) {
    const json list = jobs();
    if (list.size() != count) return false;
    for (const json& job : list)
      if (job.at("status") != "finished") return false;
    return true;
  }

  // Every rank log of every job, from every agent.
  std::vector<fs::path> all_logs() const {
    std::vector<fs::path> files;
    for (int job = 0; job < submitted_; ++job)
      for (const fs::path& file : logs(job)) files.push_back(file);
    return files;
  }

  // Every rank log of `job`, from every agent.
  std::vector<fs::path> logs(int job, int rank = -1) const {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir_.path())) {
      const fs::path job_dir = entry.path() / ("job-" + std::to_string(job));
      if (!entry.path().filename().string().starts_with("logs-") || !fs::exists(job_dir)) continue;
      for (const auto& log : fs::directory_iterator(job_dir))
        if (log.path().extension() == ".log" &&
            (rank < 0 || log.path().filename() == "rank-" + std::to_string(rank) + ".log"))
          files.push_back(log.path());
    }
    return files;
  }

 private:
  TempDir dir_;
  std::string database_;
  fs::path secret_, config_;
  pid_t serve_ = -1;
  std::string address_;
  std::map<std::string, pid_t> agents_;
  int submitted_ = 0;
  std::vector<std::string> peer_flags_;
  TlsSettings peer_tls_;
};

}  // namespace tessel::test
