// `tessel serve`: the scheduler daemon. It drives the same Scheduler core as
// the simulator, on wall-clock rounds, over real nodes that agents register.
//
// The core decides logically: who runs where, who is preempted. The daemon
// turns that into processes, and holds two rules the core cannot see:
//   - a job never has two live launches: a new launch waits at the gate
//     until every process of the job's previous launch has exited;
//   - a GPU is never given to a process while another may still run on it:
//     the gate also waits for the GPUs' previous occupants to exit.
// A process counts as exited when its agent reports the exit, or, on a node
// that went silent, once the agent's lease has surely expired and its grace
// period passed (node timeout, twice, plus grace plus one second). A silent
// node is lost through the core (Scheduler::lose_node): a job the elasticity
// plugin keeps is relaunched on its other GPUs, resuming; the others wait.
//
// Every submission, launch, exit and node is written to the Journal before
// anyone is told about it. After a crash, the daemon restores every job from
// it, waits for agents to report what still runs (at most a node timeout plus
// grace), adopts the launches that survived intact, and only then schedules.
#pragma once

#include <utility>  // before Asio (asio issue #944)

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "auth.hpp"
#include "config/experiment.hpp"
#include "connection.hpp"
#include "journal.hpp"
#include "plugins/registry.hpp"
#include "scheduler/decision_log.hpp"
#include "scheduler/scheduler.hpp"
#include "tls.hpp"

namespace tessel::cluster {

class SlurmExecutor;

struct DaemonOptions {
  std::string database;
  bool new_run = false;  // begin a new run even if an unfinished one exists
  std::string label;
};

// Round durations, for `tessel status` and the benchmark.
struct RoundTimes {
  std::uint64_t rounds = 0;
  double last_ms = 0, p50_ms = 0, p99_ms = 0, max_ms = 0;  // over the last 1,000 rounds
  std::vector<double> recent_ms;                          // the last 20, oldest first
};

class SchedulerDaemon {
 public:
  // Composes the scheduler and opens (or resumes) the run. Throws UserError.
  SchedulerDaemon(asio::io_context& io, const ExperimentConfig& config, PluginRegistry& registry, Secret secret,
                  DaemonOptions options);
  ~SchedulerDaemon();

  // Binds HOST:PORT (port 0: any free port) and returns where it listens.
  tcp::endpoint listen(const std::string& host_port);
  void start();
  // Closes every connection and marks the run 'interrupted'. Jobs keep
  // running on their nodes until their agents' leases expire (Slurm's, until
  // they end or a restarted daemon adopts them).
  void stop();

  std::int64_t run_id() const { return journal_.run(); }
  bool resumed() const { return journal_.resumed(); }
  std::size_t recovered_jobs() const { return recovered_jobs_; }
  RoundTimes round_times() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Peer;
  struct NodeEntry;
  struct Rank;
  struct Launch;
  struct JobEntry;

  double now() const;  // seconds since the run's time 0

  // Connections.
  void accept();
  void on_message(const std::shared_ptr<Peer>& peer, const Message& message);
  void on_closed(const std::shared_ptr<Peer>& peer, const std::string& why);
  void authenticate(const std::shared_ptr<Peer>& peer, const Message& hello);

  // Agents.
  void on_register(const std::shared_ptr<Peer>& peer, const Message& message);
  void on_heartbeat(NodeEntry& node, const Message& message);
  void on_started(NodeEntry& node, const Message& message);
  void on_exited(NodeEntry& node, const Message& message);
  void record_exit(NodeEntry& node, const Message& exit);
  // The node is lost: the core decides what that means for its jobs.
  void node_down(NodeEntry& node, const std::string& why);
  void save_node(const NodeEntry& node);
  // What the Slurm executor reports for `node`, taken as that node's agent's word.
  void on_slurm_report(const std::string& node, const json& report);

  // Clients.
  // A submission (one job, or a batch) is checked at once and then waits
  // for the end of the io_context's turn: every submission that arrived in
  // that turn is journalled in one transaction (group commit), and each is
  // acknowledged only once that transaction is committed.
  void queue_submission(const std::shared_ptr<Peer>& peer, const Message& message);
  void commit_submissions();
  json on_jobs(const Message& message);
  json on_cancel(const Message& message);
  json on_status();
  // Asks the agent that ran the rank for its log; the client's reply waits
  // for the agent's (on_log). Throws RequestError.
  void on_logs(const std::shared_ptr<Peer>& client, const Message& message);
  void on_log(NodeEntry& node, const Message& message);
  // Answers the clients still waiting for a log from `node`, which left.
  void fail_log_requests(const NodeEntry& node, const std::string& why);
  // The rank's log's path on that node ("/logs/job-3/rank-0.log"), or where
  // it is when the node's agent has not said its --log-dir to this daemon.
  std::string log_location(const std::string& node, JobId job, int rank) const;
  // "launch 4: rank 1 on node a2 exited with code 3; its log: a2:/logs/job-0/rank-1.log"
  std::string failure_text(JobId job, LaunchId launch, const RankRecord& rank, const std::string& error) const;
  // A failed launch's failure as the journal has it: its first rank that exited non-zero.
  std::string failure_of(const LaunchRecord& launch) const;
  // Submissions and cancels need the disk: refused while the journal cannot write.
  void require_writable() const;
  std::string cannot_write() const;

  // Launches.
  Launch& create_launch(JobId job, const Allocation& allocation, bool resume);
  void open_gate();
  bool may_dispatch(const Launch& launch) const;
  void dispatch(Launch& launch);
  // Stops a launch: its processes get SIGTERM, then SIGKILL after the grace.
  void abandon(Launch& launch, const std::string& reason);
  // abandon() for the job's current launch, which the core no longer counts.
  void stop_current_launch(JobId job, const std::string& reason);
  // The core resized a running job (a round's elasticity, or a node lost
  // under it): on real nodes that is a stop and a relaunch at the new size,
  // resuming from its checkpoint.
  void relaunch_resized(const ResizeOutcome& resize, const std::string& reason, double now);
  void rank_gone(Launch& launch, Rank& rank, std::optional<int> code, int signal);
  // Ends the launch if none of its processes can still run, and tells the
  // core what that means for the job. The launch may be gone afterwards.
  void end_if_done(LaunchId launch);
  void resolve_recovered(Launch& launch);
  // end_if_done or resolve_recovered for every launch, then open_gate.
  void settle();
  NodeEntry* node_named(const std::string& name);
  const NodeEntry* node_named(const std::string& name) const;
  double grace_of(JobId job) const;
  // How long a job waits for its next launch after its `failed_attempts`-th failure.
  double retry_wait(int failed_attempts) const;
  // Whether the launch's progress is the job's: while it runs, and while it
  // stops (a preempted job may report during its grace period).
  bool progress_counts(const Launch& launch) const;

  // Time.
  void schedule_round();
  void round();
  void watch();
  // While the journal cannot write: replays what waits, every kRetrySeconds;
  // once it is saved, sends the exit acknowledgements held back and opens the gate.
  void retry_writes();
  void save_running_jobs();
  void save_job(JobId id);  // its `jobs` row as it stands
  void save_decisions();    // those the core recorded since the last call
  RunTotals totals() const;

  void log(const std::string& line) const;

  asio::io_context& io_;
  const ExperimentConfig& config_;
  const ServeConfig& serve_;
  Secret secret_;
  // Before the journal: bad TLS files are refused before a run is opened.
  // Null when [serve] insecure = true.
  std::shared_ptr<TlsContext> tls_;
  // [serve] executor = "slurm": before the journal too, so that a Slurm
  // that does not answer is refused before a run is opened. Null for agents.
  std::unique_ptr<SlurmExecutor> slurm_;
  std::map<std::string, std::shared_ptr<Peer>> slurm_peers_;  // by node
  Journal journal_;
  DecisionLog decisions_;
  std::unique_ptr<Scheduler> core_;
  std::optional<tcp::acceptor> acceptor_;
  asio::steady_timer round_timer_;
  asio::steady_timer watch_timer_;
  asio::steady_timer accept_timer_;
  bool accept_failing_ = false;  // logged once per streak
  // Shared by every connection: bytes of unfinished frames, all peers together.
  std::shared_ptr<BufferBudget> buffer_budget_;

  std::set<std::shared_ptr<Peer>> peers_;
  std::vector<std::unique_ptr<NodeEntry>> nodes_;  // by name lookup; a NodeId may be re-registered
  std::map<LaunchId, std::unique_ptr<Launch>> launches_;  // live ones
  std::vector<JobEntry> jobs_;                             // by JobId
  struct PendingSubmission {
    std::weak_ptr<Peer> peer;
    std::vector<JobRequest> jobs;
    bool batch = false;  // answered with the list of ids
  };
  std::vector<PendingSubmission> pending_submissions_;
  std::uint64_t submitted_jobs_ = 0, submit_commits_ = 0;  // by this daemon, for `status`
  LaunchId next_launch_ = 1;

  // Recovery after a restart: no round runs until every recovered launch is
  // confirmed or given up, at the latest at this deadline (run time).
  bool recovering_ = false;
  double recovery_deadline_ = 0;
  std::size_t recovered_jobs_ = 0;

  double capacity_gpu_seconds_ = 0;
  double capacity_since_ = 0;
  std::int64_t rounds_ = 0;
  Clock::time_point next_round_at_;
  double counters_saved_at_ = 0;
  std::size_t decisions_saved_ = 0;
  double checkpointed_at_ = 0;
  std::vector<double> round_ms_;  // the last 1,000
  // Exits recorded while the journal could not write: their agents hear
  // `exit_recorded` once they are saved. (node, launch, rank)
  std::vector<std::tuple<std::string, LaunchId, int>> held_exit_acks_;
  double retried_at_ = 0;
  bool stopped_ = false;
  // `tessel logs` requests sent to agents, by request id.
  struct LogRequest {
    std::weak_ptr<Peer> client;
    std::string node;
    json reply;  // what the daemon already knows: job, launch, rank, node
  };
  std::map<std::uint64_t, LogRequest> log_requests_;
  std::uint64_t next_log_request_ = 1;
};

}  // namespace tessel::cluster
