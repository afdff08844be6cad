// Helpers shared by the test suites: paths handed over by meson, temporary
// directories, running the `tessel` binary, and running a simulation from
// TOML text in-process.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "config/experiment.hpp"
#include "results/store.hpp"
#include "tessel/throughput.hpp"

namespace tessel::test {

namespace fs = std::filesystem;

fs::path source_root();
fs::path build_root();
fs::path test_plugin(const std::string& name);  // path of a test-only plugin library
fs::path tessel_exe();
// A file under ../shared/data, or nullopt (tests skip) when it is absent.
std::optional<fs::path> shared_data(const std::string& relative);

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path write(const std::string& name, const std::string& contents) const;

 private:
  fs::path path_;
};

// A mount for the length of a test: a small tmpfs (a disk that fills up) or
// a read-only bind of a file or folder onto itself. Mounting needs root (CI
// runs as root); where it is refused, mounted() is false and the test skips.
class TestMount {
 public:
  static TestMount tmpfs(const fs::path& at, std::size_t bytes);
  static TestMount read_only(const fs::path& at);
  TestMount(TestMount&& other) noexcept : at_(std::move(other.at_)) { other.at_.clear(); }
  TestMount& operator=(TestMount&&) = delete;
  ~TestMount();
  bool mounted() const { return !at_.empty(); }

 private:
  explicit TestMount(fs::path at) : at_(std::move(at)) {}
  fs::path at_;  // empty: nothing mounted
};

// Writes `file` until its file system has no room left (on a TestMount::tmpfs:
// the disk is full); removing the file gives the room back.
void fill_disk(const fs::path& file);

struct CommandResult {
  int code = -1;
  std::string out;
  std::string err;
};

// Runs `tessel` with the arguments, in `cwd`, capturing its output.
CommandResult run_tessel(const std::vector<std::string>& args, const fs::path& cwd = fs::current_path(),
                         const std::vector<std::string>& env = {});
// Runs any program.
CommandResult run_command(const std::vector<std::string>& argv, const fs::path& cwd = fs::current_path(),
                          const std::vector<std::string>& env = {});

// Simulates the experiment in `toml` (written to dir/name) and returns its results.
RunResults simulate(const TempDir& dir, const std::string& toml, const std::string& name = "experiment.toml");

// One unit of work a second, whatever the job and its shape: hand-worked
// figures stay in seconds.
class FlatRate final : public ThroughputModel {
 public:
  std::string_view name() const override { return "flat"; }
  double rate(const JobSpec&, const Shape&) const override { return 1; }
};

// Runs `config` twice: as is, where rounds account running jobs only if a
// plugin reads their progress (lazy progress), and with a round observer,
// which makes every round account every job. Checks that each job's status,
// first start, finish, preemptions, attained service and GPU-seconds are
// the same in both, and returns the preemptions of the run, for the caller
// to check that the ranking of running jobs mattered.
int check_lazy_progress_changes_nothing(const ExperimentConfig& config);
// Checks that each job's status, first start, finish, preemptions, attained
// service and GPU-seconds are the same in both runs; returns the
// preemptions of `b`.
int check_same_jobs(const RunResults& a, const RunResults& b);

// An experiment in which jobs queue, are preempted, stopped and wait again:
// multi-GPU synthetic jobs on nodes of 4 GPUs, with node failures and
// crashing jobs, 300-s rounds, consolidated placement; `allocation` is the
// stage's TOML table, `extra` TOML appended (say, an [output] table).
struct BusyLoad {
  int nodes = 6;
  int jobs = 300;
  int jobs_per_hour = 6;
  int seed = 3;
};
std::string busy_experiment(const std::string& allocation, const std::string& extra = "", const BusyLoad& load = {});

// Finish time of each job, by id (NaN if it did not finish).
std::vector<double> finish_times(const RunResults& results);

// The reason of `job`'s decision at `time` in `stage`; empty if none.
std::string reason_of(const RunResults& results, JobId job, double time, PluginKind stage);
// The times at which `job` was placed (started or restarted).
std::vector<double> placed_at(const RunResults& results, JobId job);

// The first column of the first row of `sql` on the database at `db`, read
// as a count (0 without a row) or as text ("" without a row).
std::int64_t count(const fs::path& db, const std::string& sql);
std::string query_text(const fs::path& db, const std::string& sql);

}  // namespace tessel::test
