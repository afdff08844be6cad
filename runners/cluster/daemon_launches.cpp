// SchedulerDaemon, launches: from the core's decision to processes on
// nodes and back. The gate (may_dispatch) holds the two rules in daemon.hpp;
// end_if_done tells the core what a launch's end means for its job;
// resolve_recovered settles launches found in the journal after a restart.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "daemon_state.hpp"
#include "job_process.hpp"

namespace tessel::cluster {

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
  journal_.launched(record);  // before any agent hears of it
  entry.history.push_back(record);
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
  // A launch waits while the journal cannot write: it may not be saved yet.
  if (!journal_.writable()) return;
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
  // Saved before any agent hears it: a restarted daemon adopting this launch
  // must know the port is held (the gate opens only while the journal writes).
  journal_.save_launch_port(launch.id, launch.master_port);
  const JobRequest& request = jobs_[launch.job].request;
  const auto world = static_cast<int>(launch.ranks.size());
  for (Rank& rank : launch.ranks) {
    NodeEntry* node = node_named(rank.record.node);
    for (int gpu : rank.record.gpus) {
      const auto at = std::find(node->gpu_indices.begin(), node->gpu_indices.end(), gpu);
      node->occupant[at - node->gpu_indices.begin()] = launch.id;
    }
    rank.sent = true;
    node->agent->send(message("launch", {{"launch", launch.id},
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

void SchedulerDaemon::relaunch_resized(const ResizeOutcome& resize, const std::string& reason, double now) {
  // A job the same round started has no run yet (at most a launch still
  // stopping from before): the launch its start creates is at the new size,
  // and a second one would wait for it forever (rule 1).
  const auto current = launches_.find(jobs_[resize.job].current);
  const bool running = current != launches_.end() && current->second->core_running;
  stop_current_launch(resize.job, reason);
  if (running) create_launch(resize.job, resize.to, true);
  journal_.resized({now, resize.job, resize.from.gpu_count(), resize.to.gpu_count(), resize.cost_seconds,
                    resize.to.layout});
  save_job(resize.job);
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
      node->agent->send(message("stop", {{"launch", launch.id}, {"grace_seconds", grace_of(launch.job)}}));
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
  // Once the training is done, a rank failing on its way out fails nothing.
  const bool failed = !code || *code != 0;
  if (failed && launch.stop_reason.empty() && !launch.recovering && !launch.exit_window_ends) {
    // The first failure is the cause: the ranks stopped after it end too.
    if (code) launch.failure = failure_text(launch.job, launch.id, rank.record, rank.error);
    abandon(launch, code ? "failed" : "lost");
  }
}

void SchedulerDaemon::end_if_done(LaunchId launch_id) {
  const auto found = launches_.find(launch_id);
  if (found == launches_.end()) return;
  Launch& launch = *found->second;
  for (const Rank& rank : launch.ranks)
    if (!rank.gone) return;
  bool all_zero = true;
  for (const Rank& rank : launch.ranks) all_zero = all_zero && rank.record.exit_code == 0;
  std::string outcome =
      launch.stop_reason.empty() ? (all_zero || launch.exit_window_ends ? "finished" : "failed") : launch.stop_reason;
  // A process gone without a word died with its agent (a node crash). The
  // ranks that failed meanwhile failed because their peer vanished
  // (torch.distributed does): the node's fault, not the job's, so no retry is used.
  const auto unreported = std::find_if(launch.ranks.begin(), launch.ranks.end(),
                                       [](const Rank& rank) { return rank.sent && !rank.record.exit_code; });
  if (outcome == "failed" && unreported != launch.ranks.end()) {
    const std::string what = "launch " + std::to_string(launch.id) + " of job " + std::to_string(launch.job) +
                             ": rank " + std::to_string(unreported->record.rank) + " on " +
                             unreported->record.node + " died with its agent";
    if (jobs_[launch.job].failures_forgiven <= serve_.max_retries) {
      ++jobs_[launch.job].failures_forgiven;
      log(what + "; counted as lost, not as a failed attempt");
      outcome = "lost";
    } else {
      log(what + " again, past the " + std::to_string(serve_.max_retries + 1) +
          " such losses forgiven; counted as a failed attempt: the job may be what takes its nodes down");
    }
  }
  // It ended with its last process, when that exited (perhaps while we were
  // down); now, if some process was given up on without a word.
  double t = 0;
  bool all_seen = !launch.ranks.empty();
  for (const Rank& rank : launch.ranks) {
    if (rank.exited_at) t = std::max(t, *rank.exited_at);
    else all_seen = false;
  }
  if (!all_seen) t = now();
  const JobId id = launch.job;
  JobEntry& entry = jobs_[id];
  if (entry.current == launch.id) entry.current = 0;
  const JobState& job = core_->job(id);
  if (launch.core_running && job.running()) {
    if (outcome == "finished") {
      core_->complete(id, t, JobStatus::finished);
    } else if (outcome == "failed") {
      entry.last_error = launch.failure;
      if (entry.last_error.empty()) {
        LaunchRecord ended{launch.id, id, launch.decided, launch.resume, outcome, {}, 0, std::nullopt};
        for (const Rank& rank : launch.ranks) ended.ranks.push_back(rank.record);
        entry.last_error = failure_of(ended);
      }
      if (job.attempts > serve_.max_retries) {
        log("job " + std::to_string(id) + " failed " + std::to_string(job.attempts) + " times; giving up. Last error: " +
            entry.last_error);
        core_->complete(id, t, JobStatus::failed);
      } else {
        core_->interrupt(id, t, /*failed_attempt=*/true);
        const double wait = retry_wait(job.attempts);
        core_->hold_until(id, now() + wait);
        log("job " + std::to_string(id) + " failed (attempt " + std::to_string(job.attempts) + " of " +
            std::to_string(serve_.max_retries + 1) + "): " + entry.last_error + "; retrying in " +
            (std::ostringstream() << wait).str() + " s");
      }
    } else {
      core_->interrupt(id, t);  // lost with its node
    }
  } else if (launch.recovered && outcome == "finished" && job.waiting()) {
    core_->complete(id, t, JobStatus::finished);  // it ended while we were down
  } else if (outcome == "preempted" && job.waiting() && job.executed_work >= job.spec.total_work) {
    // Preempted on progress a heartbeat old, it had done its last iteration
    // (its ranks were on their way out; seen on a GPU node): another launch
    // would only resume at the end and exit, on GPUs another job needs.
    log("job " + std::to_string(id) + " had done its last iteration when preempted (launch " +
        std::to_string(launch.id) + "): finished");
    core_->complete(id, t, JobStatus::finished);
    outcome = "finished";
  }
  journal_.save_launch_end(launch.id, t, outcome);
  save_job(id);
  launches_.erase(found);
}

double SchedulerDaemon::retry_wait(int failed_attempts) const {
  // 1 s, 2 s, 4 s ... ([serve] retry_seconds, doubled per failed attempt, at
  // most retry_max_seconds).
  return std::min(serve_.retry_max_seconds, serve_.retry_seconds * std::exp2(std::min(failed_attempts - 1, 60)));
}

std::string SchedulerDaemon::failure_text(JobId job, LaunchId launch, const RankRecord& rank,
                                          const std::string& error) const {
  return "launch " + std::to_string(launch) + ": rank " + std::to_string(rank.rank) + " on node " + rank.node + " " +
         (error.empty() ? describe_exit(rank.exit_code.value_or(-1), rank.signal) : "could not start: " + error) +
         "; its log: " + rank.node + ":" + log_location(rank.node, job, rank.rank);
}

std::string SchedulerDaemon::failure_of(const LaunchRecord& launch) const {
  for (const RankRecord& rank : launch.ranks)
    if (rank.exit_code && *rank.exit_code != 0) return failure_text(launch.job, launch.id, rank, "");
  return "launch " + std::to_string(launch.id) + " failed";
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
  // Whole: every process still runs or has finished cleanly (ranks of one
  // job end at slightly different times). A process its agent stopped (its
  // lease ran out while we were down) did not finish, whatever its exit code.
  bool all_known = true, whole = true, any_alive = false, stopped_by_agent = false;
  for (const Rank& rank : launch.ranks) {
    if (!rank.gone && !rank.confirmed) all_known = false;
    if (rank.gone && (rank.record.exit_code != 0 || rank.stopped_by_agent)) whole = false;
    if (!rank.gone) any_alive = true;
    stopped_by_agent = stopped_by_agent || rank.stopped_by_agent;
  }
  if (!all_known) return;
  launch.recovering = false;
  JobEntry& entry = jobs_[launch.job];
  const JobState& job = core_->job(launch.job);
  if (whole && any_alive && launch.stop_reason.empty() && job.waiting() && !entry.cancelled) {
    Allocation allocation;
    bool nodes_known = true;
    for (const Rank& rank : launch.ranks) {
      const NodeEntry* node = node_named(rank.record.node);
      if (node == nullptr) {
        nodes_known = false;
        break;
      }
      for (int gpu : rank.record.gpus) {
        const auto at = std::find(node->gpu_indices.begin(), node->gpu_indices.end(), gpu);
        if (at == node->gpu_indices.end()) {
          nodes_known = false;
          break;
        }
        const GpuId id = core_->cluster().node(node->id).first_gpu + static_cast<GpuId>(at - node->gpu_indices.begin());
        if (std::find(allocation.gpus.begin(), allocation.gpus.end(), id) == allocation.gpus.end())
          allocation.gpus.push_back(id);
      }
    }
    if (nodes_known && core_->cluster().can_assign(allocation)) {
      core_->adopt(launch.job, allocation, now());
      launch.core_running = true;
      entry.current = launch.id;
      log("job " + std::to_string(launch.job) + " still runs (launch " + std::to_string(launch.id) + "): adopted");
      // Rank 0 had ended the training before the restart (its progress is
      // the job's): the others' exit window starts again now.
      const Rank& first = launch.ranks.front();
      if (first.gone && first.record.exit_code == 0 && job.executed_work >= job.spec.total_work)
        launch.exit_window_ends = now() + grace_of(launch.job);
      save_job(launch.job);
      return;
    }
  }
  // Not whole, or stopping before the restart: stop what is left; the job
  // (waiting in the core) runs again later. Lost (a process stopped by its
  // agent or gone without a word) or failed, its run was an attempt.
  bool all_zero = !stopped_by_agent;
  for (const Rank& rank : launch.ranks) all_zero = all_zero && rank.gone && rank.record.exit_code == 0;
  if (launch.stop_reason.empty() && !all_zero) {
    std::string reason = "lost";
    if (!stopped_by_agent)
      for (const Rank& rank : launch.ranks)
        if (rank.gone && rank.record.exit_code && *rank.record.exit_code != 0) reason = "failed";
    abandon(launch, reason);
    if (job.waiting() && !entry.cancelled) core_->end_attempt(launch.job);
    end_if_done(launch.id);
    return;
  }
  if (!launch.stop_reason.empty())
    for (Rank& rank : launch.ranks)
      if (!rank.gone)
        if (NodeEntry* node = node_named(rank.record.node); node && node->agent)
          node->agent->send(message("stop", {{"launch", launch.id}, {"grace_seconds", grace_of(launch.job)}}));
  end_if_done(launch.id);
}

}  // namespace tessel::cluster
