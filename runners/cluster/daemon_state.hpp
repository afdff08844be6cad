// The daemon's bookkeeping behind SchedulerDaemon's private declarations:
// peers, nodes, launches and their ranks, and what the daemon keeps per job
// beside the core's JobState. Shared by daemon*.cpp only.
#pragma once

#include <chrono>

#include "daemon.hpp"

namespace tessel::cluster {

inline std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

struct SchedulerDaemon::Peer {
  enum class Role { handshaking, agent, client };
  std::shared_ptr<Connection> connection;  // null for a node of the Slurm executor
  ServerHandshake handshake;
  Role role = Role::handshaking;
  NodeEntry* node = nullptr;  // agents, once registered
  // A Slurm node's agent is the Slurm executor, in this process: its
  // orders go there instead of over a connection.
  SlurmExecutor* slurm = nullptr;
  std::string slurm_node;

  Peer(std::shared_ptr<Connection> c, const Secret& secret) : connection(std::move(c)), handshake(secret) {}
  // An order to the agent, wherever it is.
  void send(const json& order);
  void close(const std::string& why);
  std::string where() const;  // "127.0.0.1:5433", or "Slurm"
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
  std::string log_dir;  // the agent's --log-dir, where its ranks' logs are (empty: not said)
};

struct SchedulerDaemon::Rank {
  RankRecord record;
  int local_rank = 0;
  bool sent = false;       // the agent was told to start it
  bool gone = false;       // exited, or given up on
  bool confirmed = false;  // recovered launches: its agent reported it alive
  std::optional<double> lost_at;  // on a silent node: counted as gone from then (run time)
  std::optional<double> exited_at;  // when its agent saw it exit (run time), if it did
  bool stopped_by_agent = false;    // by its lease or its agent's shutdown, unasked
  std::string error;                // why its agent could not start it, if so
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
  bool recovered = false;     // from before a restart
  bool recovering = false;    // recovered and not yet confirmed or given up
  std::string master_addr;
  int master_port = 0;
  // Its first failure: which rank, how it ended and where its log is.
  std::string failure;
  // Set when rank 0 exited 0 at its last iteration: the training is done and
  // the launch counts as finished; ranks still running then are stopped from
  // this time (run time), so that one hanging in its exit holds no GPU for good.
  std::optional<double> exit_window_ends;
};

struct SchedulerDaemon::JobEntry {
  JobRequest request;
  bool cancelled = false;
  LaunchId current = 0;  // the job's live launch, if any
  int launches = 0;
  // Every launch, with its ranks' nodes: for `tessel logs`, and the nodes
  // `tessel jobs` shows once the job has ended.
  std::vector<LaunchRecord> history;
  std::string last_error;  // the last failed launch's failure
  // Failed launches counted as lost because a rank died with its agent. A
  // job that takes its node down itself (say, the OOM killer takes the
  // agent) looks the same: past max_retries + 1 of them, its failures count.
  int failures_forgiven = 0;
};

}  // namespace tessel::cluster
