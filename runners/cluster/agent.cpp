#include "agent.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include <boost/asio/connect.hpp>

#include "engine/errors.hpp"
#include "log_line.hpp"

namespace tessel::cluster {

namespace {

using Clock = std::chrono::steady_clock;

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

void say(const std::string& line) { log_line("tessel agent", line); }

}  // namespace

std::string gpu_type_from_name(const std::string& name) {
  std::istringstream words(name);
  std::vector<std::string> kept;
  for (std::string word; words >> word;) {
    for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (word == "nvidia" || word == "tesla" || word == "geforce" || word == "quadro") continue;
    kept.push_back(word.substr(0, word.find('-')));
  }
  if (kept.empty()) return "gpu";
  std::string type = kept[0];
  // "RTX 3090": a family word alone says too little.
  const bool letters_only = std::all_of(type.begin(), type.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); });
  if (letters_only && kept.size() > 1) type += kept[1];
  return type;
}

NodeInventory NodeInventory::detect(int fake_gpus, const std::string& fake_type) {
  NodeInventory inventory;
  inventory.cpus = static_cast<double>(::sysconf(_SC_NPROCESSORS_ONLN));
  inventory.mem_gb = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE)) /
                     (1024.0 * 1024 * 1024);
  if (fake_gpus >= 0) {
    for (int i = 0; i < fake_gpus; ++i) inventory.gpus.push_back(i);
    inventory.gpu_type = fake_type;
    return inventory;
  }
  FILE* smi = ::popen("nvidia-smi --query-gpu=index,name --format=csv,noheader 2>/dev/null", "r");
  if (smi != nullptr) {
    char line[512];
    while (std::fgets(line, sizeof line, smi) != nullptr) {
      int index = -1;
      char name[400] = {0};
      if (std::sscanf(line, "%d, %399[^\n]", &index, name) == 2 && index >= 0) {
        inventory.gpus.push_back(index);
        if (inventory.gpu_type.empty()) inventory.gpu_type = gpu_type_from_name(name);
      }
    }
    ::pclose(smi);
  }
  if (inventory.gpus.empty())
    throw UserError("no GPUs found (nvidia-smi is absent or lists none); --fake-gpus N registers N fake GPUs");
  return inventory;
}

NodeAgent::NodeAgent(asio::io_context& io, AgentOptions options, Secret secret, NodeInventory inventory)
    : io_(io), options_(std::move(options)), secret_(std::move(secret)),
      tls_(make_tls(options_.tls, secret_, TlsContext::Side::client)), inventory_(std::move(inventory)),
      tick_timer_(io), reconnect_timer_(io), children_(io, SIGCHLD) {}

void NodeAgent::start() {
  if (!tls_) say("warning: --insecure: every frame, job commands and environments included, crosses the network in clear");
  std::filesystem::create_directories(options_.log_dir);
  watch_children();
  connect();
  tick();
}

void NodeAgent::send(const json& message) {
  if (connection_ && connection_->is_open()) connection_->send(message);
}

// ------------------------------------------------------------ connection

void NodeAgent::connect() {
  if (shutting_down_) return;
  phase_ = Phase::connecting;
  const auto [host, port] = split_host_port(options_.scheduler, "--scheduler");
  boost::system::error_code error;
  tcp::resolver resolver(io_);
  const auto endpoints = resolver.resolve(host, std::to_string(port), error);
  if (error) {
    if (failed_connects_ == 0) say("cannot resolve " + options_.scheduler + ": " + error.message());
    reconnect_later();
    return;
  }
  // Asynchronous, so that the lease keeps ticking while a dead host times out.
  auto socket = std::make_shared<tcp::socket>(io_);
  asio::async_connect(*socket, endpoints, [this, socket, host = host](boost::system::error_code error,
                                                                     const tcp::endpoint&) {
    if (shutting_down_) return;
    if (error) {
      if (failed_connects_ == 0) say("cannot reach the scheduler at " + options_.scheduler + ": " + error.message());
      reconnect_later();
      return;
    }
    connection_ = std::make_shared<Connection>(std::move(*socket), kMaxHandshakeFrameBytes, tls_, host);
    handshake_.emplace(secret_, Role::agent);
    std::weak_ptr<Connection> weak = connection_;
    connection_->start([this](const Message& m) { on_message(m); },
                       [this, weak](const std::string& why) {
                         if (weak.lock() != connection_) return;  // an older connection
                         if (connection_->tls_refused()) {
                           // Like a wrong secret in the login: the same again would fail the same way.
                           say("scheduler at " + options_.scheduler + ": " + why + "; giving up");
                           exit_code_ = 2;
                           shut_down();
                           return;
                         }
                         if (phase_ == Phase::registered)
                           say("lost the scheduler: " + why);
                         else if (!tls_ && !connection_->heard() && exit_code_ == 0 && !shutting_down_ &&
                                  failed_connects_ == 0)
                           say("the scheduler closed the connection before its challenge; if it requires TLS, "
                               "run without --insecure");
                         else if (exit_code_ == 0 && !shutting_down_) say("scheduler connection closed: " + why);
                         phase_ = Phase::connecting;
                         if (exit_code_ == 0) reconnect_later();
                       });
  });
}

void NodeAgent::reconnect_later() {
  if (shutting_down_) return;
  // 0.1 s doubling to 5 s, with jitter so that a restarted daemon is not
  // hit by every agent at once.
  static thread_local std::mt19937 random{std::random_device{}()};
  const double base = std::min(5.0, 0.1 * (1 << std::min(failed_connects_, 6)));
  const double delay = base * std::uniform_real_distribution<double>(0.5, 1.0)(random);
  ++failed_connects_;
  reconnect_timer_.expires_after(seconds(delay));
  reconnect_timer_.async_wait([this](boost::system::error_code error) {
    if (!error) connect();
  });
}

void NodeAgent::on_message(const Message& m) {
  switch (phase_) {
    case Phase::connecting:
      send(handshake_->hello(m));
      phase_ = Phase::challenged;
      return;
    case Phase::challenged:
      try {
        handshake_->check(m);
      } catch (const ProtocolError& e) {
        say(std::string(e.what()) + "; giving up");
        exit_code_ = 2;
        shut_down();
        throw;
      }
      connection_->set_max_payload(kMaxFrameBytes);
      phase_ = Phase::welcomed;
      send_register();
      return;
    case Phase::welcomed:
      if (m.type() == "refused") {
        // Our name is taken, perhaps by our own former connection that the
        // daemon has not yet given up on: try again later.
        say("registration refused: " + m.text("reason") + "; retrying");
        throw ProtocolError("registration refused");
      }
      if (m.type() != "registered") throw ProtocolError("expected 'registered', got '" + m.type() + "'");
      on_registered(m);
      return;
    case Phase::registered: break;
  }
  // Only a daemon that counts us as registered renews our jobs' lease; a
  // handshake or a refusal says nothing about them.
  last_heard_ = Clock::now();
  if (m.type() == "ack") return;
  if (m.type() == "launch") return on_launch(m);
  if (m.type() == "stop") return on_stop(m);
  if (m.type() == "read_log") return on_read_log(m);
  if (m.type() == "exit_recorded") {
    unrecorded_exits_.erase({static_cast<std::uint64_t>(m.integer("launch", 0)), static_cast<int>(m.integer("rank", 0))});
    finish_if_idle();
    return;
  }
  throw ProtocolError("unexpected '" + m.type() + "' message");
}

void NodeAgent::send_register() {
  json running = json::array();
  for (const auto& [key, process] : processes_)
    running.push_back({{"launch", key.first}, {"rank", key.second}, {"pid", process->pid()}});
  json exits = json::array();
  for (const auto& [key, exit] : unrecorded_exits_) exits.push_back(exit_report(exit));
  json gpus = json::array();
  for (int index : inventory_.gpus) gpus.push_back({{"index", index}, {"gpu_type", inventory_.gpu_type}});
  std::string address = options_.address;
  if (address.empty()) address = connection_->local_endpoint().address().to_string();
  send(message("register", {{"name", options_.name},
                            {"address", address},
                            {"gpus", gpus},
                            {"cpus", inventory_.cpus},
                            {"mem_gb", inventory_.mem_gb},
                            {"running", running},
                            {"exits", exits},
                            {"log_dir", options_.log_dir.string()}}));
}

void NodeAgent::on_registered(const Message& m) {
  heartbeat_seconds_ = std::max(0.01, m.number("heartbeat_seconds"));
  node_timeout_seconds_ = std::max(2 * heartbeat_seconds_, m.number("node_timeout_seconds"));
  phase_ = Phase::registered;
  last_heard_ = Clock::now();
  failed_connects_ = 0;
  fenced_ = false;
  // Exits that happened after our register message left were held back;
  // the daemon ignores the ones it already has.
  for (const auto& [key, exit] : unrecorded_exits_) send(exit_report(exit));
  say("registered " + options_.name + " with " + std::to_string(inventory_.gpus.size()) + " GPUs at " +
      options_.scheduler);
}

// ------------------------------------------------------------ jobs

void NodeAgent::on_launch(const Message& m) {
  const LaunchOrder order = LaunchOrder::from(m);
  const Key key{order.launch, order.rank};
  if (processes_.contains(key) || unrecorded_exits_.contains(key)) return;  // a repeated order
  if (shutting_down_ || fenced_) {
    // Not started: reported as a process we stopped, so it counts as lost.
    report_exit(key, message("exited", {{"launch", order.launch}, {"rank", order.rank}, {"code", -1},
                                        {"signal", SIGTERM}, {"stopped", true}}));
    return;
  }
  try {
    auto process = std::make_unique<JobProcess>(io_, order, options_.log_dir, options_.name);
    send(message("started", {{"launch", order.launch}, {"rank", order.rank}, {"pid", process->pid()}}));
    processes_.emplace(key, std::move(process));
  } catch (const std::exception& e) {
    say("cannot launch job " + std::to_string(order.job) + ": " + e.what());
    report_exit(key, message("exited", {{"launch", order.launch}, {"rank", order.rank}, {"code", 127}, {"signal", 0},
                                        {"error", e.what()}}));
  }
}

void NodeAgent::on_stop(const Message& m) {
  const auto launch = static_cast<std::uint64_t>(m.integer("launch", 0));
  const double grace = m.number("grace_seconds");
  for (auto& [key, process] : processes_)
    if (key.first == launch) process->stop(std::max(0.0, grace));
}

void NodeAgent::on_read_log(const Message& m) {
  const auto job = static_cast<std::uint32_t>(m.integer("job", 0, 0xfffffffe));
  const int rank = static_cast<int>(m.integer("rank", 0, 1 << 20));
  const auto max_bytes = m.integer("max_bytes", 0, kMaxLogBytes);
  send(message("log", log_tail(static_cast<std::uint64_t>(m.integer("request", 0)),
                                 rank_log_path(options_.log_dir, job, rank), max_bytes, options_.name)));
}

void NodeAgent::report_exit(const Key& key, json exit) {
  const UnrecordedExit& kept = unrecorded_exits_[key] = {std::move(exit), Clock::now()};
  if (phase_ == Phase::registered) send(exit_report(kept));
}

json NodeAgent::exit_report(const UnrecordedExit& exit) const {
  json report = exit.report;
  report["seconds_ago"] = std::chrono::duration<double>(Clock::now() - exit.at).count();
  return report;
}

void NodeAgent::watch_children() {
  children_.async_wait([this](boost::system::error_code error, int) {
    if (error) return;
    reap();
    watch_children();
  });
}

void NodeAgent::reap() {
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (auto it = processes_.begin(); it != processes_.end(); ++it) {
      JobProcess& process = *it->second;
      if (process.pid() != pid) continue;
      json exit = message("exited", {{"launch", it->first.first},
                                     {"rank", it->first.second},
                                     {"code", WIFEXITED(status) ? WEXITSTATUS(status) : -1},
                                     {"signal", WIFSIGNALED(status) ? WTERMSIG(status) : 0},
                                     {"stopped", process.stopping()}});
      process.read_progress();
      if (const auto& progress = process.last_progress()) {
        exit["iteration"] = progress->iteration;
        exit["total"] = progress->total;
      }
      process.exited(status);
      const Key key = it->first;
      reported_iteration_.erase(key);
      processes_.erase(it);
      report_exit(key, std::move(exit));
      break;
    }
  }
  finish_if_idle();
}

void NodeAgent::tick() {
  if (phase_ == Phase::registered) {
    json progress = json::array();
    for (auto& [key, process] : processes_)
      if (auto p = process->read_progress()) {
        auto& last = reported_iteration_[key];
        if (p->iteration == last) continue;
        last = p->iteration;
        progress.push_back({{"launch", key.first}, {"rank", key.second}, {"iteration", p->iteration}, {"total", p->total}});
      }
    send(message("heartbeat", {{"progress", progress}}));
  }
  // The lease: a silent daemon has (or soon will have) given our jobs away.
  const auto lease_ends = last_heard_ + seconds(node_timeout_seconds_);
  const bool leased = node_timeout_seconds_ > 0 && !fenced_ && !processes_.empty();
  if (leased && Clock::now() > lease_ends) {
    say("the scheduler has been silent for " + std::to_string(node_timeout_seconds_) + " s: stopping " +
        std::to_string(processes_.size()) + " job processes");
    fence();
  }
  // It has dropped this connection too (it drops a node silent this long).
  // A partition may leave it open here, dead, until TCP gives up minutes
  // later: a new one gets through as soon as the network does.
  if (phase_ == Phase::registered && node_timeout_seconds_ > 0 && Clock::now() > lease_ends)
    connection_->close("silent for " + std::to_string(node_timeout_seconds_) + " s");
  // The next beat, or the lease's end if sooner: the daemon counts our
  // processes as gone a second after the lease plus their grace, so the
  // stop may not wait up to a beat longer.
  Clock::duration next = seconds(heartbeat_seconds_);
  if (leased && !fenced_)
    next = std::clamp<Clock::duration>(lease_ends - Clock::now() + std::chrono::milliseconds(1),
                                       std::chrono::milliseconds(1), next);
  tick_timer_.expires_after(next);
  tick_timer_.async_wait([this](boost::system::error_code error) {
    if (!error) tick();
  });
}

void NodeAgent::fence() {
  fenced_ = true;
  for (auto& [key, process] : processes_) process->stop(process->order().grace_seconds);
}

void NodeAgent::shut_down() {
  if (shutting_down_) return;
  shutting_down_ = true;
  reconnect_timer_.cancel();
  for (auto& [key, process] : processes_) process->stop(process->order().grace_seconds);
  finish_if_idle();
}

void NodeAgent::finish_if_idle() {
  if (!shutting_down_ || !processes_.empty()) return;
  tick_timer_.cancel();
  children_.cancel();
  if (connection_) connection_->close_after_sending("agent shutting down");
  // Leave a moment for the last exit reports to go out.
  reconnect_timer_.expires_after(std::chrono::milliseconds(100));
  reconnect_timer_.async_wait([this](boost::system::error_code) {
    if (connection_) connection_->close("agent shut down");
    io_.stop();
  });
}

}  // namespace tessel::cluster
