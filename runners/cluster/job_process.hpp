// One process of a launch, on the agent's node.
//
// It runs in its own process group, so that a stop reaches everything the
// job started: SIGTERM to the group, then SIGKILL after the grace period.
// PR_SET_PDEATHSIG kills it if the agent dies, so a dead agent never leaves a
// copy running that the scheduler would start again elsewhere. (A process
// the job forks and detaches from the group escapes both; that is the job's
// own business.)
//
// Its environment is the agent's, plus the job's `env`, plus tessel's:
// CUDA_VISIBLE_DEVICES, TESSEL_JOB_ID, TESSEL_LAUNCH_ID, TESSEL_PROGRESS,
// RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, and TESSEL_RESUME=1
// when the job ran before. Its stdout and stderr are appended to
// <log_dir>/job-<id>/rank-<rank>.log, between lines tessel writes there.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "connection.hpp"

#include <boost/asio/steady_timer.hpp>

namespace tessel::cluster {

// A `launch` message, checked.
struct LaunchOrder {
  std::uint64_t launch = 0;
  std::uint32_t job = 0;
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  std::vector<int> gpus;  // indices on this node
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::string workdir;
  std::string master_addr;
  int master_port = 0;
  bool resume = false;
  double grace_seconds = 10;

  static LaunchOrder from(const Message& launch);  // throws ProtocolError
};

struct Progress {
  std::int64_t iteration = 0;
  std::int64_t total = 0;  // 0: not said
};

// Where a rank's output goes on its node: <log_dir>/job-<id>/rank-<rank>.log,
// one file for every launch of that rank there.
std::filesystem::path rank_log_path(const std::filesystem::path& log_dir, std::uint32_t job, int rank);

// "exited with code 127 (the command was not found or could not start)",
// "killed by signal 9 (SIGKILL)": a process's end and, where it has a usual
// one, its meaning. `code` is -1 when `signal` killed it.
std::string describe_exit(int code, int signal);

// "iteration 120 of 1000" or "iteration 120"; nothing for anything else.
std::optional<Progress> parse_progress_line(std::string_view line);

// A rank 0's progress file, read as it grows: an agent's JobProcess and the
// Slurm executor (over a shared filesystem) read it the same way.
class ProgressReader {
 public:
  explicit ProgressReader(std::filesystem::path path) : path_(std::move(path)) {}
  // The new latest progress line since the last call, if any.
  std::optional<Progress> read();
  const std::optional<Progress>& last() const { return last_; }

 private:
  std::filesystem::path path_;
  std::uint64_t offset_ = 0;
  std::string partial_;
  std::optional<Progress> last_;
};

// Where a launch's rank 0 writes its progress: beside its log.
std::filesystem::path progress_path(const std::filesystem::path& log_dir, std::uint32_t job, std::uint64_t launch);

// What tessel sets in a rank's environment, over the job's own `env`:
// CUDA_VISIBLE_DEVICES, TESSEL_JOB_ID, TESSEL_LAUNCH_ID, TESSEL_PROGRESS,
// RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT and, when the job
// ran before, TESSEL_RESUME=1 (absent otherwise: see resumes()).
std::map<std::string, std::string> rank_environment(const LaunchOrder& order, const std::filesystem::path& progress);

// The reply to a `read_log` order: the last `max_bytes` of the log at
// `path` on `node`, or an error naming it.
json log_tail(std::uint64_t request, const std::filesystem::path& path, std::int64_t max_bytes, const std::string& node);

class JobProcess {
 public:
  // Forks and execs. Throws std::runtime_error, with the reason also in the
  // log, when the working directory does not exist here; an exec failure
  // shows as exit code 127, explained in the log.
  JobProcess(asio::io_context& io, const LaunchOrder& order, const std::filesystem::path& log_dir,
             const std::string& node);
  JobProcess(const JobProcess&) = delete;

  const LaunchOrder& order() const { return order_; }
  pid_t pid() const { return pid_; }
  bool stopping() const { return stopping_; }

  // SIGTERM to the group now, SIGKILL `grace` seconds later unless it exited.
  void stop(double grace_seconds);
  // The new latest progress line since the last call, if any.
  std::optional<Progress> read_progress();
  // The latest progress line read so far, new or not: what an exit report
  // says, though a heartbeat may have sent it already.
  const std::optional<Progress>& last_progress() const { return progress_.last(); }
  // Called once the process was reaped, with its waitpid status.
  void exited(int status);

 private:
  void log(const std::string& line) const;

  LaunchOrder order_;
  std::filesystem::path log_path_;
  std::filesystem::path progress_path_;
  ProgressReader progress_;
  pid_t pid_ = -1;
  bool stopping_ = false;
  asio::steady_timer kill_timer_;
};

}  // namespace tessel::cluster
