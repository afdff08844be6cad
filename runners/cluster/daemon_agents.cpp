// SchedulerDaemon, agents' side: registration and reconciliation,
// heartbeats and progress, process starts and exits, nodes going down.
#include <algorithm>
#include <cctype>

#include "daemon_state.hpp"

namespace tessel::cluster {

namespace {

bool valid_node_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

// Rank 0's exit report says it ran its last iteration: of the total its
// progress lines gave, or else of the job's --iterations.
bool training_done(const Message& exit, const JobRequest& request) {
  if (!exit.has("iteration")) return false;
  const std::int64_t said = exit.has("total") ? exit.integer("total", 0) : 0;
  const std::int64_t total = said > 0 ? said : request.iterations.value_or(0);
  return total > 0 && exit.integer("iteration", 0) >= total;
}

}  // namespace

void SchedulerDaemon::on_register(const std::shared_ptr<Peer>& peer, const Message& m) {
  if (slurm_ && peer->slurm == nullptr) {
    log("refused agent " + m.text("name").substr(0, 64) + " from " + peer->connection->peer() +
        ": this scheduler runs its jobs through Slurm");
    peer->connection->send(message("refused", {{"reason", "this scheduler runs its jobs through Slurm ([serve] executor = \"slurm\"); it takes no agents"}}));
    peer->connection->close_after_sending("agent refused: Slurm executes");
    return;
  }
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
    // Two live agents under one name would each disown the other's
    // processes. A restarted agent whose old connection lingers (the host
    // lost power) gets in once that connection has been silent a node timeout.
    const std::string holder = node->agent->where();
    log("refused agent " + name + " from " + peer->connection->peer() + ": the name is in use by " + holder);
    peer->connection->send(message("refused", {{"reason", "node name '" + name + "' is in use by the agent at " + holder}}));
    peer->connection->close_after_sending("duplicate node name");
    return;
  }
  // One transaction for all this node's changes, the loss of its old self
  // included: the journal never holds half of them.
  auto transaction = journal_.transaction();
  if (node != nullptr && node->gpu_indices != indices) {
    // Other GPUs than before: the old node stays down for good.
    if (node->up) node_down(*node, "re-registered with other GPUs");
    node->name += "~" + std::to_string(node->id);
    node = nullptr;
  }
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
    entry->id = core_->add_node(spec);
    entry->up = true;
    node = entry.get();
    nodes_.push_back(std::move(entry));
    log("node " + name + " joined with " + std::to_string(indices.size()) + " " + gpu_type + " GPUs");
  } else if (!node->up) {
    core_->repair_node(node->id);
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
  if (m.has("log_dir")) node->log_dir = m.text("log_dir").substr(0, 4096);
  // Registered first: an agent takes no order before it hears this, and
  // reconciling below may send it some (stops for launches we no longer count).
  peer->send(message("registered", {{"heartbeat_seconds", serve_.heartbeat_seconds},
                                                {"node_timeout_seconds", serve_.node_timeout_seconds}}));

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
      peer->send(message("stop", {{"launch", launch_id}, {"grace_seconds", serve_.grace_seconds}}));
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
      peer->send(message("stop", {{"launch", launch.id}, {"grace_seconds", grace_of(launch.job)}}));
  }
  // What we sent here and the agent no longer has: gone without a word.
  for (auto& [id, launch] : launches_)
    for (Rank& rank : launch->ranks)
      if (rank.record.node == name && rank.sent && !rank.gone && !alive.contains({id, rank.record.rank}))
        rank_gone(*launch, rank, std::nullopt, 0);
  save_node(*node);
  transaction.commit();
  settle();
}

void SchedulerDaemon::on_heartbeat(NodeEntry& node, const Message& m) {
  node.agent->send(message("ack"));
  const double t = now();
  for (const json& entry : m.array("progress")) {
    const Message p = Message::of(entry, "progress");
    const auto it = launches_.find(static_cast<LaunchId>(p.integer("launch", 0)));
    if (it == launches_.end() || p.integer("rank", 0) != 0) continue;
    if (!progress_counts(*it->second)) continue;
    const Launch& launch = *it->second;
    core_->report_progress(launch.job, static_cast<double>(p.integer("iteration", 0)), t);
  }
}

bool SchedulerDaemon::progress_counts(const Launch& launch) const {
  // A stopping launch's job has no newer launch running (the gate holds it
  // until this one has exited), so what it reports during its grace period
  // (a checkpoint on SIGTERM) is where the job's next launch resumes.
  // A recovered launch counts once adopted; a done job's, never.
  if (core_->job(launch.job).done() || jobs_[launch.job].cancelled) return false;
  return launch.core_running || (!launch.stop_reason.empty() && !launch.recovering);
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
  const auto launch = static_cast<LaunchId>(m.integer("launch", 0));
  const int rank = static_cast<int>(m.integer("rank", 0, 1 << 20));
  // Durable: the agent may forget it. Not yet: it hears so after retry_writes.
  if (journal_.writable())
    node.agent->send(message("exit_recorded", {{"launch", launch}, {"rank", rank}}));
  else
    held_exit_acks_.emplace_back(node.name, launch, rank);
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
  // An exit reported late (we were down, or the agent was away) happened
  // as long ago as the agent says.
  const double t = now();
  const double exited_at = m.has("seconds_ago") ? std::clamp(t - m.number("seconds_ago"), 0.0, t) : t;
  for (Rank& rank : launch.ranks) {
    if (rank.record.rank != rank_index || rank.record.node != node.name || rank.gone) continue;
    // Its last progress line; a recovered launch's too, though the core has
    // not adopted it (it may have finished while we were down).
    if (rank_index == 0 && m.has("iteration") &&
        (progress_counts(launch) || (launch.recovered && launch.stop_reason.empty() && !core_->job(launch.job).done())))
      core_->report_progress(launch.job, static_cast<double>(m.integer("iteration", 0)), exited_at);
    if (rank_index == 0 && code == 0 && launch.stop_reason.empty() && !launch.exit_window_ends &&
        training_done(m, jobs_[launch.job].request)) {
      // The others may be stuck in their exit (a collective's teardown):
      // they get the job's grace period to end on their own.
      launch.exit_window_ends = exited_at + grace_of(launch.job);
    }
    // Stopped by its agent without our asking (its lease ran out, or the
    // agent is shutting down): whatever its exit code, it did not finish.
    rank.stopped_by_agent = m.has("stopped") && m.flag("stopped") && launch.stop_reason.empty();
    if (rank.stopped_by_agent && !launch.recovering) abandon(launch, "lost");
    rank.exited_at = exited_at;
    if (m.has("error")) rank.error = m.text("error").substr(0, 4096);
    rank_gone(launch, rank, code, signal);
    if (launch.recovering)
      resolve_recovered(launch);
    else
      end_if_done(launch.id);
    return;
  }
}

void SchedulerDaemon::save_node(const NodeEntry& node) {
  journal_.node_changed({node.name, node.address, node.gpu_type, static_cast<int>(node.gpu_indices.size()), node.cpus,
                         node.mem_gb, node.up, now()});
}

void SchedulerDaemon::node_down(NodeEntry& node, const std::string& why) {
  node.up = false;
  log("node " + node.name + " is down: " + why);
  fail_log_requests(node, "went down");
  if (node.agent) {
    auto agent = node.agent;
    node.agent = nullptr;
    agent->node = nullptr;
    agent->close("node timed out");
  }
  const double t = now();
  save_node(node);
  for (auto& [id, launch] : launches_)
    for (Rank& rank : launch->ranks)
      if (rank.record.node == node.name && !rank.gone && rank.sent)
        // Its agent stops it within a node timeout of our last word (its
        // lease), and it is dead a grace period later.
        rank.lost_at = t + serve_.node_timeout_seconds + grace_of(launch->job) + 1;

  // The core decides what the loss means for the jobs it counts as running
  // there: elasticity's keep_after_loss keeps some on their other GPUs, the
  // others wait again. Either way their processes stop: a torch.distributed
  // group does not outlive a lost rank, so a kept job is relaunched at its
  // new size, resuming from its checkpoint, once the old processes are gone.
  const NodeLoss loss = core_->lose_node(node.id, t);
  for (JobId job : loss.stopped) {
    stop_current_launch(job, "lost");
    save_job(job);
  }
  for (const ResizeOutcome& shrunk : loss.shrunk) relaunch_resized(shrunk, "lost", t);
  save_decisions();
  // What else ran there: launches already stopping, or recovered ones not yet
  // adopted, whose ranks settle as lost when their lease is surely over.
  for (auto& [id, launch] : launches_)
    for (const Rank& rank : launch->ranks)
      if (rank.record.node == node.name && !rank.gone && !launch->recovering) abandon(*launch, "lost");
  settle();
}

}  // namespace tessel::cluster
