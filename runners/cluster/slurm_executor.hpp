// The Slurm executor of `tessel serve` ([serve] executor = "slurm"): the
// scheduler decides, Slurm runs. To the daemon it is one more agent per
// Slurm node, living in the daemon's process: it takes the agent protocol's
// orders (launch, stop, read_log, exit_recorded) and answers with the agent
// protocol's reports (register, heartbeat, started, exited, log). So the
// daemon's gate, journal, retries, recovery and client commands are one path
// for agents and for Slurm; only how a rank runs differs.
//
//   nodes     sinfo (the partition's nodes) and scontrol show node (Gres=gpu,
//             CPUs, memory, address), read once, at start
//   launch    one Slurm job per launch (sbatch), pinned where placement put
//             it: per node --nodelist and --gres=gpu:N (a heterogeneous job
//             when the launch spans nodes), its ranks there started by one
//             srun, overcommitted (a rank needs no core of its own); each rank an srun task whose
//             environment is an agent's (rank_environment) and whose exit
//             status it writes beside its log. The job is named
//             tessel-<tag>-l<launch> and its comment lists its ranks' nodes,
//             so that a restarted daemon finds and adopts it.
//   stop      scancel --state=PENDING and scancel --signal=TERM (the steps),
//             then scancel --full --signal=KILL after the grace
//   states    scontrol show job, every heartbeat_seconds: a job that ended
//             reports its ranks' exits; one CANCELLED that the daemon did not
//             stop was cancelled outside tessel, a failed attempt
//   progress  rank 0's progress file, read from the shared folder
//
// Slurm's commands run on one worker thread, in the order given (a stop
// after its sbatch), and post their results back to the io_context: the
// event loop never waits on a slow slurmctld. Each may take half of
// [serve] node_timeout_seconds, then is killed: a hung one would hold every
// later order (and the daemon's exit) behind it. An sbatch killed that way
// fails its launch; should it have submitted the job anyway, the next poll
// finds a job of this run that no launch accounts for and cancels it.
//
// Needs: a folder every node shares (logs, progress and exit files, batch
// scripts), and GPUs as GRES (Gres=gpu:N in slurm.conf, with gres.conf).
#pragma once

#include <utility>  // before Asio (asio issue #944)

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/program.hpp"
#include "job_process.hpp"
#include "protocol.hpp"

namespace tessel::cluster {

struct SlurmNode {
  std::string name, address, gpu_type;
  int gpus = 0;
  double cpus = 0, mem_gb = 0;
};

// The fields of one line of `scontrol show ... -o` ("JobId=12 JobState=RUNNING ...").
std::map<std::string, std::string> scontrol_fields(const std::string& line);

// Whether a JobState of `scontrol show job` is one a job ends in (COMPLETED,
// CANCELLED, FAILED, ...); false for every state in which its processes may
// still run or run again (PENDING, RUNNING, COMPLETING, SUSPENDED, STOPPED,
// REQUEUE_HOLD, SPECIAL_EXIT, ...).
bool slurm_job_ended(const std::string& state);

// The GPUs a node's Gres= offers: "gpu:4", "gpu:v100:4(S:0-1)", "gpu:a100:2,shard:8"
// give (count, type; "gpu" when untyped); nothing when it has none.
std::optional<std::pair<int, std::string>> gres_gpus(const std::string& gres);

// The partition's (empty: every) usable nodes with GPUs, from sinfo and
// scontrol show node. Throws UserError naming [serve] when Slurm does not
// answer or offers no GPU.
std::vector<SlurmNode> slurm_nodes(const std::string& partition);

class SlurmExecutor {
 public:
  // A report from `node`, as its agent would send it.
  using Report = std::function<void(const std::string& node, const json& report)>;

  // Reads the nodes (slurm_nodes); throws UserError.
  SlurmExecutor(asio::io_context& io, std::string partition, Report report);
  ~SlurmExecutor();

  // Starts polling. `folder`: this run's shared folder; `tag`: names this
  // run's Slurm jobs, the same after a restart; `poll_seconds`: how often
  // job states are read (and heartbeats sent); `command_seconds`: how long
  // one Slurm command may take before it is killed and counts as failed.
  void start(const std::filesystem::path& folder, const std::string& tag, double poll_seconds,
             double command_seconds);
  // No more polls or orders; the Slurm jobs go on, for a restart to adopt.
  void stop();
  // An order the daemon gave `node`'s agent; one it cannot carry out is logged.
  void order(const std::string& node, const Message& order);
  // The daemon dropped the node (silent too long): it registers again, with
  // what runs there, once Slurm answers.
  void node_closed(const std::string& node);
  const std::vector<SlurmNode>& nodes() const { return nodes_; }

 private:
  struct Rank {
    int rank = 0;
    std::string node;
  };
  struct Launch {
    std::uint64_t id = 0;
    std::uint32_t job = 0;
    std::vector<LaunchOrder> orders;  // as the daemon sent them; none for an adopted one
    std::vector<Rank> ranks;
    std::string slurm_id;  // once sbatch has answered
    std::string state;     // Slurm's JobState when last polled
    int unseen_polls = 0;  // polls since sbatch that did not list it
    bool started = false;  // reported
    bool stop_asked = false;
    bool term_sent = false;
    double grace = 0;
    std::unique_ptr<asio::steady_timer> kill_timer;
    std::unique_ptr<ProgressReader> progress;  // rank 0's
    std::int64_t reported_iteration = -1;
  };

  void carry_out(const std::string& node, const Message& order);  // throws ProtocolError
  // Runs Slurm command `argv` on the worker thread (within the time limit),
  // then `done` with its result on the io_context.
  void off_loop(std::vector<std::string> argv, std::function<void(const CommandResult&)> done);
  void submit(Launch& launch);
  void on_submitted(std::uint64_t launch, const std::string& slurm_id, const std::string& error);
  void stop_launch(Launch& launch);
  void poll();
  void on_polled(const CommandResult& result);
  // The launch's Slurm job ended: its ranks' exits, kept until recorded.
  void ended(Launch& launch, const std::map<std::string, std::string>& fields);
  void report_started(Launch& launch);
  void exit_all(Launch& launch, int code, int signal, const std::string& error);
  void keep_exit(const Launch& launch, const Rank& rank, json report);
  void send(const std::string& node, const json& report);
  void log(const std::string& line) const;
  std::filesystem::path job_folder(std::uint32_t job) const;

  asio::io_context& io_;
  std::string partition_;
  Report report_;
  std::vector<SlurmNode> nodes_;
  std::filesystem::path folder_;
  std::string tag_;
  double poll_seconds_ = 1;
  double command_seconds_ = 0;  // 0: no limit
  asio::steady_timer poll_timer_;
  bool stopped_ = false;
  bool adopted_ = false;  // the first poll has adopted this run's jobs from before a restart
  bool poll_failing_ = false;
  std::set<std::string> registered_;  // nodes the daemon knows
  std::map<std::uint64_t, Launch> launches_;
  // Slurm jobs of this run that no launch accounts for (an sbatch killed
  // after it had submitted), cancelled once each.
  std::set<std::string> strays_;
  // Exits the daemon has not recorded yet, by (launch, rank): node, report.
  std::map<std::pair<std::uint64_t, int>, std::pair<std::string, json>> unrecorded_;
  // Posted results check it: none runs once the executor is gone.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  bool quitting_ = false;
};

}  // namespace tessel::cluster
