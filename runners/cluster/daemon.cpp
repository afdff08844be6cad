#include "daemon.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>

#include "engine/errors.hpp"
#include "plugins/composition.hpp"
#include "results/summary.hpp"

namespace tessel::cluster {

namespace {

constexpr double kHandshakeSeconds = 5;
constexpr double kWatchSeconds = 0.1;
constexpr std::size_t kMaxListedJobs = 50'000;
constexpr double kCountersSeconds = 5;
constexpr double kCheckpointSeconds = 10;

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool valid_node_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

// ------------------------------------------------------------------ state

struct SchedulerDaemon::Peer {
  enum class Role { handshaking, agent, client };
  std::shared_ptr<Connection> connection;
  ServerHandshake handshake;
  Role role = Role::handshaking;
  NodeEntry* node = nullptr;  // agents, once registered
  asio::steady_timer deadline;

  Peer(std::shared_ptr<Connection> c, const Secret& secret, asio::io_context& io)
      : connection(std::move(c)), handshake(secret), deadline(io) {}
};

struct SchedulerDaemon::NodeEntry {
  std::string name;
  NodeId id = 0;
  std::string address;
  std::string gpu_type;
  double cpus = 0, mem_gb = 0;
  std::vector<int> gpu_indices;  // the agent's indices, in core GPU order
  std::shared_ptr<Peer> agent;   // null while disconnected
  Clock::time_point last_heard;
  bool up = false;
  // By position in gpu_indices: the launch whose process may still run on
  // that GPU (0: none). The gate's second rule.
  std::vector<LaunchId> occupant;
  int next_port = 0;
};

struct SchedulerDaemon::Rank {
  RankRecord record;
  int local_rank = 0;
  bool sent = false;       // the agent was told to start it
  bool gone = false;       // exited, or given up on
  bool confirmed = false;  // recovered launches: its agent reported it alive
  std::optional<double> lost_at;  // on a silent node: counted as gone from then (run time)
};

struct SchedulerDaemon::Launch {
  LaunchId id = 0;
  JobId job = 0;
  bool resume = false;
  double decided = 0;
  std::vector<Rank> ranks;
  bool dispatched = false;
  // Empty while the launch is the job's run; the reason once it is stopped
  // (preempted, resized, cancelled, failed, lost).
  std::string stop_reason;
  bool core_running = false;  // the core counts this launch as the job's run
  bool recovering = false;    // from before a restart, not yet confirmed
  std::string master_addr;
  int master_port = 0;
};

struct SchedulerDaemon::JobEntry {
  JobRequest request;
  bool cancelled = false;
  LaunchId current = 0;  // the job's live launch, if any
  int launches = 0;
};

SchedulerDaemon::SchedulerDaemon(asio::io_context& io, const ExperimentConfig& config, PluginRegistry& registry,
                                 Secret secret, DaemonOptions options)
    : io_(io), config_(config), serve_(config.serve), secret_(std::move(secret)),
      journal_(options.database, RunInfo{options.label.empty() ? config.output.label : options.label, "{}",
                                         config.document->text(), 0, "cluster"},
               options.new_run),
      decisions_(config.output.decisions), round_timer_(io), watch_timer_(io) {
  ComposedScheduler plugins =
      compose_scheduler(config.scheduler, registry, 0, config.document->base_directory().string());
  SchedulerSettings settings = config.scheduler.settings;
  settings.restart_seconds = 0;  // on real nodes a restart costs what it really costs
  core_ = std::make_unique<Scheduler>(std::move(plugins), ClusterState{}, serve_.model, settings, &decisions_);
  core_->expect_growing_cluster();

  RecoveredRun recovered = journal_.recover();
  next_launch_ = recovered.next_launch;
  capacity_gpu_seconds_ = recovered.capacity_gpu_seconds;
  rounds_ = recovered.rounds;
  const double t = now();
  for (JobRecordFull& saved : recovered.jobs) {
    saved.state.waiting_since = t;
    core_->restore(saved.state);
    jobs_.push_back(JobEntry{std::move(saved.request), saved.cancelled, 0, saved.state.attempts});
  }
  recovered_jobs_ = recovered.jobs.size();
  double longest_grace = 0;
  for (const LaunchRecord& record : recovered.open_launches) {
    if (record.job >= jobs_.size()) continue;
    auto launch = std::make_unique<Launch>();
    launch->id = record.id;
    launch->job = record.job;
    launch->resume = record.resume;
    launch->decided = record.decided;
    launch->stop_reason = record.outcome;
    launch->recovering = true;
    launch->dispatched = true;
    for (const RankRecord& r : record.ranks) {
      Rank rank;
      rank.record = r;
      rank.sent = true;
      rank.gone = r.exited();
      launch->ranks.push_back(std::move(rank));
    }
    if (record.outcome.empty() && !core_->job(record.job).done()) jobs_[record.job].current = record.id;
    longest_grace = std::max(longest_grace, grace_of(record.job));
    launches_.emplace(record.id, std::move(launch));
  }
  if (!launches_.empty()) {
    recovering_ = true;
    // By then every agent that lost us has stopped its jobs (its lease) and
    // their grace has passed.
    recovery_deadline_ = t + serve_.node_timeout_seconds + longest_grace + 1;
  }
}

SchedulerDaemon::~SchedulerDaemon() = default;

double SchedulerDaemon::now() const { return unix_now() - journal_.epoch(); }

double SchedulerDaemon::grace_of(JobId job) const {
  return jobs_[job].request.grace_seconds.value_or(serve_.grace_seconds);
}

void SchedulerDaemon::log(const std::string& line) const { std::cerr << "tessel serve: " << line << std::endl; }

SchedulerDaemon::NodeEntry* SchedulerDaemon::node_named(const std::string& name) {
  for (auto& node : nodes_)
    if (node->name == name) return node.get();
  return nullptr;
}

RoundTimes SchedulerDaemon::round_times() const {
  RoundTimes t;
  t.rounds = static_cast<std::uint64_t>(rounds_);
  if (round_ms_.empty()) return t;
  std::vector<double> sorted = round_ms_;
  std::sort(sorted.begin(), sorted.end());
  t.last_ms = round_ms_.back();
  t.p50_ms = percentile(sorted, 50);
  t.p99_ms = percentile(sorted, 99);
  t.max_ms = sorted.back();
  t.recent_ms.assign(round_ms_.end() - std::min<std::ptrdiff_t>(20, std::ssize(round_ms_)), round_ms_.end());
  return t;
}

// ------------------------------------------------------------------ connections

tcp::endpoint SchedulerDaemon::listen(const std::string& host_port) {
  const auto [host, port] = split_host_port(host_port, "--listen");
  boost::system::error_code error;
  const auto address = asio::ip::make_address(host, error);
  if (error) throw UserError("--listen '" + host_port + "': '" + host + "' is not an IP address");
  acceptor_.emplace(io_);
  const tcp::endpoint endpoint(address, port);
  acceptor_->open(endpoint.protocol(), error);
  if (!error) acceptor_->set_option(tcp::acceptor::reuse_address(true), error);
  if (!error) acceptor_->bind(endpoint, error);
  if (!error) acceptor_->listen(asio::socket_base::max_listen_connections, error);
  if (error) throw UserError("cannot listen on " + host_port + ": " + error.message());
  return acceptor_->local_endpoint();
}

void SchedulerDaemon::start() {
  capacity_since_ = now();
  if (journal_.resumed())
    log("resumed run " + std::to_string(journal_.run()) + ": " + std::to_string(recovered_jobs_) + " jobs, " +
        std::to_string(launches_.size()) + " launches to confirm");
  accept();
  next_round_at_ = Clock::now();
  schedule_round();
  watch();
}

void SchedulerDaemon::stop() {
  if (stopped_) return;
  stopped_ = true;
  round_timer_.cancel();
  watch_timer_.cancel();
  if (acceptor_) acceptor_->close();
  for (const auto& peer : std::set(peers_)) peer->connection->close("scheduler stopping");
  save_running_jobs();
  journal_.mark_run("interrupted", "the scheduler stopped; `tessel serve` on this database resumes the run");
}

void SchedulerDaemon::accept() {
  acceptor_->async_accept([this](boost::system::error_code error, tcp::socket socket) {
    if (stopped_) return;
    if (!error) {
      auto connection = std::make_shared<Connection>(std::move(socket), kMaxHandshakeFrameBytes);
      auto peer = std::make_shared<Peer>(connection, secret_, io_);
      peers_.insert(peer);
      std::weak_ptr<Peer> weak = peer;
      connection->start(
          [this, weak](const Message& m) {
            if (auto p = weak.lock()) on_message(p, m);
          },
          [this, weak](const std::string& why) {
            if (auto p = weak.lock()) on_closed(p, why);
          });
      connection->send(peer->handshake.challenge());
      peer->deadline.expires_after(seconds(kHandshakeSeconds));
      peer->deadline.async_wait([weak](boost::system::error_code e) {
        auto p = weak.lock();
        if (!e && p && p->role == Peer::Role::handshaking) p->connection->close("no handshake within 5 s");
      });
    }
    accept();
  });
}

void SchedulerDaemon::on_closed(const std::shared_ptr<Peer>& peer, const std::string& why) {
  peers_.erase(peer);
  peer->deadline.cancel();
  if (peer->role == Peer::Role::handshaking) {
    log("dropped " + peer->connection->peer() + " before it authenticated: " + why);
  } else if (peer->role == Peer::Role::agent && peer->node != nullptr && peer->node->agent == peer) {
    // Silence from here on; the node is down once it lasts a node timeout.
    peer->node->agent = nullptr;
    log("agent " + peer->node->name + " disconnected: " + why);
  } else if (peer->role == Peer::Role::client && why != "peer closed the connection") {
    log("dropped client " + peer->connection->peer() + ": " + why);
  }
}

void SchedulerDaemon::authenticate(const std::shared_ptr<Peer>& peer, const Message& hello) {
  std::string why;
  const auto role = peer->handshake.check(hello, why);
  if (!role) {
    log("refused " + peer->connection->peer() + ": " + why);
    peer->connection->send(message("refused", {{"reason", why}}));
    peer->connection->close_after_sending("refused: " + why);
    return;
  }
  peer->role = *role == Role::agent ? Peer::Role::agent : Peer::Role::client;
  peer->deadline.cancel();
  peer->connection->set_max_payload(kMaxFrameBytes);
  peer->connection->send(peer->handshake.welcome());
}

void SchedulerDaemon::on_message(const std::shared_ptr<Peer>& peer, const Message& m) {
  switch (peer->role) {
    case Peer::Role::handshaking: return authenticate(peer, m);
    case Peer::Role::agent:
      if (m.type() == "register") return on_register(peer, m);
      if (peer->node == nullptr || peer->node->agent != peer) throw ProtocolError("agent sent '" + m.type() + "' before registering");
      peer->node->last_heard = Clock::now();
      if (m.type() == "heartbeat") return on_heartbeat(*peer->node, m);
      if (m.type() == "started") return on_started(*peer->node, m);
      if (m.type() == "exited") return on_exited(*peer->node, m);
      throw ProtocolError("unknown agent message '" + m.type() + "'");
    case Peer::Role::client: {
      json reply;
      try {
        if (m.type() == "submit") reply = on_submit(m);
        else if (m.type() == "jobs") reply = on_jobs(m);
        else if (m.type() == "cancel") reply = on_cancel(m);
        else if (m.type() == "status") reply = on_status();
        else throw ProtocolError("unknown request '" + m.type() + "'");
      } catch (const RequestError& e) {
        // The client asked for something impossible; it hears why and may go on.
        reply = message("error", {{"message", e.what()}});
      }
      peer->connection->send(reply);
      return;
    }
  }
}

// ------------------------------------------------------------------ agents

void SchedulerDaemon::on_register(const std::shared_ptr<Peer>& peer, const Message& m) {
  const std::string name = m.text("name");
  if (!valid_node_name(name)) throw ProtocolError("node name '" + name.substr(0, 64) + "' is not 1-64 of [A-Za-z0-9._-]");
  std::vector<int> indices;
  std::string gpu_type = "gpu";
  for (const json& gpu : m.array("gpus")) {
    const Message g = Message::of(gpu, "gpu");
    const int index = static_cast<int>(g.integer("index", 0, 4095));
    if (std::find(indices.begin(), indices.end(), index) != indices.end()) throw ProtocolError("GPU index repeated");
    indices.push_back(index);
    gpu_type = g.text("gpu_type").substr(0, 64);
    if (indices.size() > 1024) throw ProtocolError("too many GPUs");
  }
  const std::string address = m.text("address").substr(0, 256);
  const double cpus = std::max(0.0, m.number("cpus"));
  const double mem_gb = std::max(0.0, m.number("mem_gb"));
  const json& running = m.array("running");
  const json& exits = m.array("exits");

  NodeEntry* node = node_named(name);
  if (node != nullptr && node->agent != nullptr && node->agent != peer) {
    log("agent " + name + " registered again from " + peer->connection->peer() + "; dropping its old connection");
    auto old = node->agent;
    node->agent = nullptr;
    old->node = nullptr;
    old->connection->close("replaced by a new registration");
  }
  if (node != nullptr && node->gpu_indices != indices) {
    // Other GPUs than before: the old node stays down for good.
    if (node->up) node_down(*node, "re-registered with other GPUs");
    node->name += "~" + std::to_string(node->id);
    node = nullptr;
  }
  auto transaction = journal_.transaction();
  if (node == nullptr) {
    auto entry = std::make_unique<NodeEntry>();
    entry->name = name;
    entry->gpu_indices = indices;
    entry->occupant.assign(indices.size(), 0);
    NodeSpec spec;
    spec.name = name;
    spec.gpu_type = gpu_type;
    spec.gpus = static_cast<int>(indices.size());
    spec.cpus = cpus;
    spec.mem_gb = mem_gb;
    entry->id = core_->cluster().add_node(spec);
    entry->up = true;
    node = entry.get();
    nodes_.push_back(std::move(entry));
    log("node " + name + " joined with " + std::to_string(indices.size()) + " " + gpu_type + " GPUs");
  } else if (!node->up) {
    core_->cluster().set_up(node->id, true);
    node->up = true;
    log("node " + name + " is back");
  }
  node->agent = peer;
  peer->node = node;
  node->address = address;
  node->gpu_type = gpu_type;
  node->cpus = cpus;
  node->mem_gb = mem_gb;
  node->last_heard = Clock::now();

  // What exited while we were apart, then what still runs.
  for (const json& exit : exits) record_exit(*node, Message::of(exit, "exited"));
  std::set<std::pair<LaunchId, int>> alive;
  for (const json& r : running) {
    const Message process = Message::of(r, "running");
    const auto launch_id = static_cast<LaunchId>(process.integer("launch", 0));
    const int rank_index = static_cast<int>(process.integer("rank", 0, 1 << 20));
    alive.insert({launch_id, rank_index});
    auto it = launches_.find(launch_id);
    Rank* rank = nullptr;
    if (it != launches_.end())
      for (Rank& candidate : it->second->ranks)
        if (candidate.record.rank == rank_index && candidate.record.node == name && !candidate.gone) rank = &candidate;
    if (rank == nullptr) {
      // A process we do not count on (superseded, or from another run): stop it.
      peer->connection->send(message("stop", {{"launch", launch_id}, {"grace_seconds", serve_.grace_seconds}}));
      continue;
    }
    Launch& launch = *it->second;
    rank->confirmed = true;
    rank->lost_at.reset();
    for (int gpu : rank->record.gpus) {
      const auto at = std::find(node->gpu_indices.begin(), node->gpu_indices.end(), gpu);
      if (at != node->gpu_indices.end()) node->occupant[at - node->gpu_indices.begin()] = launch.id;
    }
    if (!launch.stop_reason.empty())
      peer->connection->send(message("stop", {{"launch", launch.id}, {"grace_seconds", grace_of(launch.job)}}));
  }
  // What we sent here and the agent no longer has: gone without a word.
  for (auto& [id, launch] : launches_)
    for (Rank& rank : launch->ranks)
      if (rank.record.node == name && rank.sent && !rank.gone && !alive.contains({id, rank.record.rank}))
        rank_gone(*launch, rank, std::nullopt, 0);
  journal_.save_node(name, address, static_cast<int>(indices.size()), gpu_type, cpus, mem_gb, true, now());
  transaction.commit();

  peer->connection->send(message("registered", {{"heartbeat_seconds", serve_.heartbeat_seconds},
                                                {"node_timeout_seconds", serve_.node_timeout_seconds}}));
  settle();
}

void SchedulerDaemon::on_heartbeat(NodeEntry& node, const Message& m) {
  node.agent->connection->send(message("ack"));
  const double t = now();
  for (const json& entry : m.array("progress")) {
    const Message p = Message::of(entry, "progress");
    const auto it = launches_.find(static_cast<LaunchId>(p.integer("launch", 0)));
    if (it == launches_.end() || p.integer("rank", 0) != 0) continue;
    const Launch& launch = *it->second;
    if (!launch.core_running || !launch.stop_reason.empty()) continue;
    core_->report_progress(launch.job, static_cast<double>(p.integer("iteration", 0)), t);
  }
}

void SchedulerDaemon::on_started(NodeEntry& node, const Message& m) {
  const auto it = launches_.find(static_cast<LaunchId>(m.integer("launch", 0)));
  if (it == launches_.end()) return;
  const int rank = static_cast<int>(m.integer("rank", 0, 1 << 20));
  const int pid = static_cast<int>(m.integer("pid", 1, 1 << 30));
  for (const Rank& r : it->second->ranks)
    if (r.record.rank == rank && r.record.node == node.name) journal_.save_rank_start(it->first, rank, pid, now());
}

void SchedulerDaemon::on_exited(NodeEntry& node, const Message& m) {
  {
    auto transaction = journal_.transaction();
    record_exit(node, m);
    transaction.commit();
  }
  // Durable: the agent may forget it.
  node.agent->connection->send(message("exit_recorded", {{"launch", m.integer("launch", 0)}, {"rank", m.integer("rank", 0)}}));
  open_gate();
}

void SchedulerDaemon::record_exit(NodeEntry& node, const Message& m) {
  const auto launch_id = static_cast<LaunchId>(m.integer("launch", 0));
  const int rank_index = static_cast<int>(m.integer("rank", 0, 1 << 20));
  const int code = static_cast<int>(m.integer("code", -1, 255));
  const int signal = static_cast<int>(m.integer("signal", 0, 128));
  const auto it = launches_.find(launch_id);
  if (it == launches_.end()) return;
  Launch& launch = *it->second;
  for (Rank& rank : launch.ranks) {
    if (rank.record.rank != rank_index || rank.record.node != node.name || rank.gone) continue;
    if (rank_index == 0 && m.has("iteration") && launch.core_running && launch.stop_reason.empty())
      core_->report_progress(launch.job, static_cast<double>(m.integer("iteration", 0)), now());
    // Stopped by its agent without our asking (its lease ran out, or the
    // agent is shutting down): whatever its exit code, it did not finish.
    if (m.has("stopped") && m.flag("stopped") && launch.stop_reason.empty() && !launch.recovering)
      abandon(launch, "lost");
    rank_gone(launch, rank, code, signal);
    if (launch.recovering)
      resolve_recovered(launch);
    else
      end_if_done(launch.id);
    return;
  }
}

void SchedulerDaemon::node_down(NodeEntry& node, const std::string& why) {
  node.up = false;
  core_->cluster().set_up(node.id, false);
  log("node " + node.name + " is down: " + why);
  if (node.agent) {
    auto agent = node.agent;
    node.agent = nullptr;
    agent->node = nullptr;
    agent->connection->close("node timed out");
  }
  const double t = now();
  journal_.save_node(node.name, node.address, static_cast<int>(node.gpu_indices.size()), node.gpu_type, node.cpus,
                     node.mem_gb, false, t);
  std::vector<Launch*> affected;  // none ends before settle()
  for (auto& [id, launch] : launches_)
    for (Rank& rank : launch->ranks)
      if (rank.record.node == node.name && !rank.gone) {
        // Its agent stops it within a node timeout of our last word (its
        // lease), and it is dead a grace period later.
        if (rank.sent) rank.lost_at = t + serve_.node_timeout_seconds + grace_of(launch->job) + 1;
        if (std::find(affected.begin(), affected.end(), launch.get()) == affected.end()) affected.push_back(launch.get());
      }
  for (Launch* launch : affected)
    if (!launch->recovering) abandon(*launch, "lost");
  settle();
}

// ------------------------------------------------------------------ clients

json SchedulerDaemon::on_submit(const Message& m) {
  JobRequest request = JobRequest::from_json(m.object("job"));
  if (request.tenant.empty()) request.tenant = "unknown";
  const double t = now();
  JobState& job = core_->submit(request.spec(t), t);
  auto transaction = journal_.transaction();
  journal_.save_submission(job, request);
  transaction.commit();
  jobs_.push_back(JobEntry{std::move(request), false, 0, 0});
  return message("submitted", {{"job", job.spec.id}});
}

json SchedulerDaemon::on_jobs(const Message& m) {
  const std::size_t limit = m.has("limit") ? static_cast<std::size_t>(m.integer("limit", 0, kMaxListedJobs)) : 0;
  const std::size_t count = core_->job_count();
  const std::size_t wanted = limit == 0 ? std::min(count, kMaxListedJobs) : std::min(limit, count);
  json list = json::array();
  for (std::size_t id = count - wanted; id < count; ++id) {
    const JobState& job = core_->job(static_cast<JobId>(id));
    const JobEntry& entry = jobs_[id];
    std::string status = entry.cancelled ? "cancelled" : std::string(to_string(job.status));
    json nodes = json::array();
    if (const auto it = launches_.find(entry.current); it != launches_.end()) {
      const Launch& launch = *it->second;
      if (job.running() && !launch.dispatched) status = "starting";
      for (const Rank& rank : launch.ranks)
        if (std::find(nodes.begin(), nodes.end(), rank.record.node) == nodes.end()) nodes.push_back(rank.record.node);
    }
    json row = {{"id", id},
                {"name", job.spec.name},
                {"tenant", job.spec.tenant},
                {"status", status},
                {"gpus", job.running() ? job.allocation.gpu_count() : job.spec.gpus},
                {"iteration", job.executed_work},
                {"preemptions", job.preemptions},
                {"attempts", job.attempts},
                {"submitted", job.spec.arrival},
                {"nodes", nodes}};
    if (entry.request.iterations) row["iterations"] = *entry.request.iterations;
    if (job.first_start) row["started"] = *job.first_start;
    if (job.finish) row["finished"] = *job.finish;
    list.push_back(std::move(row));
  }
  return message("jobs", {{"jobs", list}, {"total", count}});
}

json SchedulerDaemon::on_cancel(const Message& m) {
  const auto id = static_cast<JobId>(m.integer("job", 0, 0xfffffffe));
  if (id >= core_->job_count()) throw RequestError("no job " + std::to_string(id));
  JobEntry& entry = jobs_[id];
  const JobState& job = core_->job(id);
  if (job.done() || entry.cancelled)
    throw RequestError("job " + std::to_string(id) + " has already ended (" +
                        (entry.cancelled ? "cancelled" : std::string(to_string(job.status))) + ")");
  auto transaction = journal_.transaction();
  entry.cancelled = true;
  core_->complete(id, now(), JobStatus::failed);
  stop_current_launch(id, "cancelled");
  journal_.save_job(core_->job(id), true);
  transaction.commit();
  open_gate();
  return message("cancelled", {{"job", id}});
}

json SchedulerDaemon::on_status() {
  json nodes = json::array();
  for (const auto& node : nodes_) {
    int free = 0;
    for (const Gpu& gpu : core_->cluster().gpus_of(node->id)) free += gpu.free();
    nodes.push_back({{"name", node->name},
                     {"up", node->up},
                     {"connected", node->agent != nullptr},
                     {"address", node->address},
                     {"gpus", node->gpu_indices.size()},
                     {"free_gpus", free}});
  }
  const RoundTimes t = round_times();
  std::size_t running = 0, waiting = 0, done = 0;
  for (const JobState* job : core_->jobs()) (job->running() ? running : job->done() ? done : waiting)++;
  return message("status", {{"run", journal_.run()},
                            {"nodes", nodes},
                            {"jobs", {{"running", running}, {"waiting", waiting}, {"done", done}}},
                            {"recovering", recovering_},
                            {"rounds", {{"count", t.rounds}, {"last_ms", t.last_ms}, {"p50_ms", t.p50_ms},
                                        {"p99_ms", t.p99_ms}, {"max_ms", t.max_ms}, {"recent_ms", t.recent_ms}}}});
}

// ------------------------------------------------------------------ launches

SchedulerDaemon::Launch& SchedulerDaemon::create_launch(JobId job_id, const Allocation& allocation, bool resume) {
  auto launch = std::make_unique<Launch>();
  launch->id = next_launch_++;
  launch->job = job_id;
  launch->resume = resume;
  launch->decided = now();
  launch->core_running = true;
  JobEntry& entry = jobs_[job_id];
  // Ranks: nodes in the order of the allocation, GPUs in order on each.
  std::vector<std::pair<NodeEntry*, std::vector<int>>> per_node;
  for (GpuId gpu : allocation.gpus) {
    const NodeId node_id = core_->cluster().gpu(gpu).node;
    NodeEntry* node = nullptr;
    for (auto& n : nodes_)
      if (n->id == node_id) node = n.get();
    const int index = node->gpu_indices[gpu - core_->cluster().node(node_id).first_gpu];
    auto it = std::find_if(per_node.begin(), per_node.end(), [&](auto& p) { return p.first == node; });
    if (it == per_node.end()) per_node.push_back({node, {index}});
    else it->second.push_back(index);
  }
  int rank = 0;
  for (auto& [node, gpus] : per_node) {
    const int processes = entry.request.per_node ? 1 : static_cast<int>(gpus.size());
    for (int local = 0; local < processes; ++local) {
      Rank r;
      r.record.rank = rank++;
      r.record.node = node->name;
      r.record.gpus = gpus;
      r.local_rank = local;
      launch->ranks.push_back(std::move(r));
    }
  }
  LaunchRecord record;
  record.id = launch->id;
  record.job = job_id;
  record.decided = launch->decided;
  record.resume = resume;
  for (const Rank& r : launch->ranks) record.ranks.push_back(r.record);
  journal_.save_launch(record);  // before any agent hears of it
  entry.current = launch->id;
  ++entry.launches;
  Launch& result = *launch;
  launches_.emplace(launch->id, std::move(launch));
  return result;
}

bool SchedulerDaemon::may_dispatch(const Launch& launch) const {
  for (const auto& [id, other] : launches_)
    if (other->job == launch.job && id != launch.id) return false;  // rule 1: one live launch per job
  for (const Rank& rank : launch.ranks) {
    const NodeEntry* node = nullptr;
    for (const auto& n : nodes_)
      if (n->name == rank.record.node) node = n.get();
    if (node == nullptr || !node->up || node->agent == nullptr) return false;
    for (int gpu : rank.record.gpus) {
      const auto at = std::find(node->gpu_indices.begin(), node->gpu_indices.end(), gpu);
      const LaunchId occupant = node->occupant[at - node->gpu_indices.begin()];
      if (occupant != 0 && occupant != launch.id) return false;  // rule 2: GPUs free of old processes
    }
  }
  return true;
}

void SchedulerDaemon::open_gate() {
  for (auto& [id, launch] : launches_)
    if (!launch->dispatched && launch->stop_reason.empty() && may_dispatch(*launch)) dispatch(*launch);
}

void SchedulerDaemon::dispatch(Launch& launch) {
  NodeEntry* master = node_named(launch.ranks.front().record.node);
  // MASTER_PORT: the next port of the range that no live launch led from
  // this node holds.
  const int span = serve_.master_port_last - serve_.master_port_first + 1;
  for (int tries = 0; tries < span; ++tries) {
    const int port = serve_.master_port_first + (master->next_port++ % span);
    bool taken = false;
    for (const auto& [id, other] : launches_)
      taken = taken || (other->dispatched && other->master_port == port && other->ranks.front().record.node == master->name);
    if (!taken) {
      launch.master_port = port;
      break;
    }
  }
  if (launch.master_port == 0) launch.master_port = serve_.master_port_first;
  launch.master_addr = master->address;
  launch.dispatched = true;
  const JobRequest& request = jobs_[launch.job].request;
  const auto world = static_cast<int>(launch.ranks.size());
  for (Rank& rank : launch.ranks) {
    NodeEntry* node = node_named(rank.record.node);
    for (int gpu : rank.record.gpus) {
      const auto at = std::find(node->gpu_indices.begin(), node->gpu_indices.end(), gpu);
      node->occupant[at - node->gpu_indices.begin()] = launch.id;
    }
    rank.sent = true;
    node->agent->connection->send(message("launch", {{"launch", launch.id},
                                                     {"job", launch.job},
                                                     {"rank", rank.record.rank},
                                                     {"local_rank", rank.local_rank},
                                                     {"world_size", world},
                                                     {"gpus", rank.record.gpus},
                                                     {"command", request.command},
                                                     {"env", request.env},
                                                     {"workdir", request.workdir},
                                                     {"master_addr", launch.master_addr},
                                                     {"master_port", launch.master_port},
                                                     {"resume", launch.resume},
                                                     {"grace_seconds", grace_of(launch.job)}}));
  }
}

void SchedulerDaemon::stop_current_launch(JobId job, const std::string& reason) {
  const auto it = launches_.find(jobs_[job].current);
  if (it == launches_.end()) return;
  Launch& launch = *it->second;
  launch.core_running = false;  // the core has already decided
  abandon(launch, reason);
  end_if_done(launch.id);
}

void SchedulerDaemon::abandon(Launch& launch, const std::string& reason) {
  if (!launch.stop_reason.empty()) return;
  launch.stop_reason = reason;
  journal_.save_launch_outcome(launch.id, reason);
  if (jobs_[launch.job].current == launch.id && reason != "failed" && reason != "lost")
    jobs_[launch.job].current = 0;
  for (Rank& rank : launch.ranks) {
    if (rank.gone) continue;
    if (!rank.sent) {
      rank.gone = true;  // never started
      continue;
    }
    NodeEntry* node = node_named(rank.record.node);
    if (node != nullptr && node->agent != nullptr)
      node->agent->connection->send(message("stop", {{"launch", launch.id}, {"grace_seconds", grace_of(launch.job)}}));
  }
}

void SchedulerDaemon::rank_gone(Launch& launch, Rank& rank, std::optional<int> code, int signal) {
  rank.gone = true;
  rank.lost_at.reset();
  rank.record.exit_code = code;
  rank.record.signal = signal;
  if (code) journal_.save_rank_exit(launch.id, rank.record.rank, *code, signal);
  if (NodeEntry* node = node_named(rank.record.node)) {
    // Its GPUs are free once no other rank of the launch runs on them.
    bool sibling_alive = false;
    for (const Rank& other : launch.ranks)
      sibling_alive = sibling_alive || (&other != &rank && !other.gone && other.record.node == rank.record.node);
    if (!sibling_alive)
      for (std::size_t i = 0; i < node->occupant.size(); ++i)
        if (node->occupant[i] == launch.id) node->occupant[i] = 0;
  }
  const bool failed = !code || *code != 0;
  if (failed && launch.stop_reason.empty() && !launch.recovering) abandon(launch, code ? "failed" : "lost");
}

void SchedulerDaemon::end_if_done(LaunchId launch_id) {
  const auto found = launches_.find(launch_id);
  if (found == launches_.end()) return;
  Launch& launch = *found->second;
  for (const Rank& rank : launch.ranks)
    if (!rank.gone) return;
  bool all_zero = true;
  for (const Rank& rank : launch.ranks) all_zero = all_zero && rank.record.exit_code == 0;
  const std::string outcome = launch.stop_reason.empty() ? (all_zero ? "finished" : "failed") : launch.stop_reason;
  const double t = now();
  const JobId id = launch.job;
  JobEntry& entry = jobs_[id];
  if (entry.current == launch.id) entry.current = 0;
  const JobState& job = core_->job(id);
  if (launch.core_running && job.running()) {
    if (outcome == "finished") {
      core_->complete(id, t, JobStatus::finished);
    } else if (outcome == "failed") {
      if (job.attempts > serve_.max_retries) {
        log("job " + std::to_string(id) + " failed " + std::to_string(job.attempts) + " times; giving up");
        core_->complete(id, t, JobStatus::failed);
      } else {
        core_->interrupt(id, t, /*failed_attempt=*/true);
      }
    } else {
      core_->interrupt(id, t);  // lost with its node
    }
  } else if (launch.recovering && outcome == "finished" && job.waiting()) {
    core_->complete(id, t, JobStatus::finished);  // it ended while we were down
  }
  journal_.save_launch_end(launch.id, t, outcome);
  journal_.save_job(core_->job(id), entry.cancelled);
  launches_.erase(found);
}

void SchedulerDaemon::settle() {
  std::vector<LaunchId> ids;
  for (auto& [id, launch] : launches_) ids.push_back(id);
  for (LaunchId id : ids)
    if (auto it = launches_.find(id); it != launches_.end()) {
      if (it->second->recovering)
        resolve_recovered(*it->second);
      else
        end_if_done(id);
    }
  open_gate();
}

void SchedulerDaemon::resolve_recovered(Launch& launch) {
  bool all_alive = true, all_known = true;
  for (const Rank& rank : launch.ranks) {
    if (!rank.gone && !rank.confirmed) all_known = false;
    if (rank.gone) all_alive = false;
  }
  if (!all_known) return;
  launch.recovering = false;
  JobEntry& entry = jobs_[launch.job];
  const JobState& job = core_->job(launch.job);
  if (all_alive && launch.stop_reason.empty() && job.waiting() && !entry.cancelled) {
    Allocation allocation;
    for (const Rank& rank : launch.ranks) {
      const NodeEntry* node = node_named(rank.record.node);
      for (int gpu : rank.record.gpus) {
        const auto at = std::find(node->gpu_indices.begin(), node->gpu_indices.end(), gpu);
        const GpuId id = core_->cluster().node(node->id).first_gpu + static_cast<GpuId>(at - node->gpu_indices.begin());
        if (std::find(allocation.gpus.begin(), allocation.gpus.end(), id) == allocation.gpus.end())
          allocation.gpus.push_back(id);
      }
    }
    if (core_->cluster().can_assign(allocation)) {
      core_->adopt(launch.job, allocation, now());
      launch.core_running = true;
      entry.current = launch.id;
      log("job " + std::to_string(launch.job) + " still runs (launch " + std::to_string(launch.id) + "): adopted");
      journal_.save_job(job, false);
      return;
    }
  }
  // Not whole, or stopping before the restart: stop what is left; the job
  // (waiting in the core) runs again later.
  bool all_zero = true;
  for (const Rank& rank : launch.ranks) all_zero = all_zero && rank.gone && rank.record.exit_code == 0;
  if (launch.stop_reason.empty() && !all_zero) {
    std::string reason = "lost";
    for (const Rank& rank : launch.ranks)
      if (rank.gone && rank.record.exit_code && *rank.record.exit_code != 0) reason = "failed";
    abandon(launch, reason);
    end_if_done(launch.id);
    return;
  }
  if (!launch.stop_reason.empty())
    for (Rank& rank : launch.ranks)
      if (!rank.gone)
        if (NodeEntry* node = node_named(rank.record.node); node && node->agent)
          node->agent->connection->send(message("stop", {{"launch", launch.id}, {"grace_seconds", grace_of(launch.job)}}));
  end_if_done(launch.id);
}

// ------------------------------------------------------------------ time

void SchedulerDaemon::schedule_round() {
  next_round_at_ += seconds(config_.scheduler.settings.round_seconds);
  // After a long stall, start afresh instead of running rounds back to back.
  if (next_round_at_ < Clock::now()) next_round_at_ = Clock::now() + seconds(config_.scheduler.settings.round_seconds);
  round_timer_.expires_at(next_round_at_);
  round_timer_.async_wait([this](boost::system::error_code error) {
    if (error || stopped_) return;
    round();
    schedule_round();
    if (now() >= checkpointed_at_ + kCheckpointSeconds) {
      journal_.checkpoint();
      checkpointed_at_ = now();
    }
  });
}

void SchedulerDaemon::round() {
  if (recovering_) return;
  const auto started = Clock::now();
  const double t = now();
  auto transaction = journal_.transaction();
  const RoundOutcome outcome = core_->run_round(t);
  for (JobId id : outcome.preempted) stop_current_launch(id, "preempted");
  for (const ResizeOutcome& resize : outcome.resized) {
    // On real nodes a resize is a checkpoint-restart at the new size.
    stop_current_launch(resize.job, "resized");
    create_launch(resize.job, core_->job(resize.job).allocation, true);
  }
  for (JobId id : outcome.started) create_launch(id, core_->job(id).allocation, jobs_[id].launches > 0);

  const ClusterState& cluster = core_->cluster();
  capacity_gpu_seconds_ += cluster.total_gpus() * std::max(0.0, t - capacity_since_);
  capacity_since_ = t;
  ++rounds_;
  // Running jobs' counters grow every round; writing them every few seconds
  // is enough for `report`, and keeps rounds short. State changes are
  // written when they happen.
  if (t >= counters_saved_at_ + kCountersSeconds) {
    save_running_jobs();
    counters_saved_at_ = t;
  }
  for (JobId id : outcome.preempted) journal_.save_job(core_->job(id), jobs_[id].cancelled);
  for (JobId id : outcome.started) journal_.save_job(core_->job(id), jobs_[id].cancelled);
  const auto active = static_cast<int>(core_->active().size());
  const auto running = static_cast<int>(core_->running_count());
  journal_.save_sample({t, cluster.total_gpus(), cluster.total_gpus() - cluster.free_gpus(), running, active - running,
                        static_cast<int>(core_->pending().size())});
  journal_.save_run_figures(cluster.installed_gpus(), capacity_gpu_seconds_, t, rounds_);
  // The log keeps every decision it records in memory; they are written
  // once and then only the new ones.
  const auto& decided = decisions_.records();
  for (; decisions_saved_ < decided.size(); ++decisions_saved_) journal_.save_decision(decided[decisions_saved_]);
  transaction.commit();
  open_gate();

  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
  if (round_ms_.size() == 1000) round_ms_.erase(round_ms_.begin());
  round_ms_.push_back(ms);
}

void SchedulerDaemon::save_running_jobs() {
  for (JobState* job : core_->active())
    if (job->running()) journal_.save_job(*job, false);
}

void SchedulerDaemon::watch() {
  const double t = now();
  const auto timeout = seconds(serve_.node_timeout_seconds);
  for (auto& node : nodes_)
    if (node->up && Clock::now() - node->last_heard > timeout) {
      auto transaction = journal_.transaction();
      node_down(*node, "silent for " + std::to_string(serve_.node_timeout_seconds) + " s");
      transaction.commit();
    }
  // Ranks on silent nodes whose lease and grace have surely run out.
  std::vector<LaunchId> ids;
  for (auto& [id, launch] : launches_) ids.push_back(id);
  for (LaunchId id : ids) {
    auto it = launches_.find(id);
    if (it == launches_.end()) continue;
    Launch& launch = *it->second;
    bool expired = false;
    for (Rank& rank : launch.ranks)
      if (!rank.gone && rank.lost_at && *rank.lost_at <= t) {
        rank_gone(launch, rank, std::nullopt, 0);
        expired = true;
      }
    if (recovering_ && launch.recovering && t >= recovery_deadline_)
      for (Rank& rank : launch.ranks)
        if (!rank.gone && !rank.confirmed) {
          rank_gone(launch, rank, std::nullopt, 0);
          expired = true;
        }
    if (expired) {
      auto transaction = journal_.transaction();
      if (launch.recovering) resolve_recovered(launch);
      else end_if_done(id);
      transaction.commit();
      open_gate();
    }
  }
  if (recovering_) {
    bool still = false;
    for (auto& [id, launch] : launches_) still = still || launch->recovering;
    if (!still) {
      recovering_ = false;
      log("recovery done: " + std::to_string(core_->running_count()) + " jobs still running were adopted");
    }
  }
  watch_timer_.expires_after(seconds(kWatchSeconds));
  watch_timer_.async_wait([this](boost::system::error_code error) {
    if (!error && !stopped_) watch();
  });
}

}  // namespace tessel::cluster
