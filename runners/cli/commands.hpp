// The `tessel` subcommands, each a few calls into libtessel. main.cpp parses
// the command line and maps exceptions to exit codes; nothing here parses.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessel::cli {

struct RunOptions {
  std::string config;
  std::string database;  // empty: [output] database
  std::vector<std::string> overrides;
  unsigned parallel = 0;  // 0: one simulation per core
  bool resume = false;
  bool quiet = false;
  std::optional<std::size_t> point;  // --point K: this sweep point alone
  bool list_points = false;
  // --slurm: the sweep as a job array (runners/sim/slurm_sweep.hpp).
  bool slurm = false;
  std::vector<std::string> slurm_options;
  unsigned max_parallel = 0;
  bool wait = false;
};

struct ReportOptions {
  std::string database;
  std::string format = "table";
  std::vector<std::int64_t> runs;
  std::string by;                 // a sweep axis to group by
  std::vector<std::string> over;  // with `by`: axes averaged over, like seeds
  std::string group;              // "vc": one row per VC of each run (or group); empty: whole runs
};

struct PlotOptions {
  std::string database;
  std::string kind = "jct-cdf";
  std::vector<std::int64_t> runs;
  std::string metric = "avg_jct_s";
  std::string by;
  std::vector<std::string> over;
  std::string output;  // default: <database stem>-<kind>.svg
};

struct PluginsOptions {
  std::string kind;  // empty: all
  std::vector<std::string> directories;
  std::vector<std::string> python_files;  // list the policy classes these files define
  bool verbose = false;
};

int run(const RunOptions& options, const std::atomic<bool>& stop);
// Copies the runs of `shards` into `output` (results/merge.hpp).
int merge(const std::string& output, const std::vector<std::string>& shards);
int validate(const std::string& config, const std::vector<std::string>& overrides, const std::atomic<bool>& stop);
int plugins(const PluginsOptions& options, const std::atomic<bool>& stop);
int report(const ReportOptions& options);
int compare(const std::string& database, std::int64_t run_a, std::int64_t run_b);
int explain(const std::string& database, std::int64_t job, std::optional<std::int64_t> run,
            std::optional<double> from, std::optional<double> to, const std::string& stage);
int plot(const PlotOptions& options);
// Prices each [[case]] of a file (a throughput model, a job, an allocation
// and its layout) without simulating: steps per second, and FLOP/s per GPU
// where the model counts its FLOPs. Format "table" or "json".
int price(const std::string& path, const std::string& format);

}  // namespace tessel::cli
