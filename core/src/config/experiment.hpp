// An experiment: one TOML file (plus --set overrides) read into typed
// settings for every section. Reading checks every key against what the
// engine reads and reports all problems at once (ConfigError, exit code 2).
//
//   [cluster]     the simulated machines and their planned changes (cluster_config.hpp)
//   [workload]    where jobs come from (workloads/workload.hpp)
//   [scheduler]   the round length and the four plugins with their arguments
//   [simulation]  fidelity knobs of the simulator
//   [failures]    random node and job failures
//   [output]      where results go
//
// Plugin arguments are checked later, against the schema each plugin
// declares, when the scheduler is composed (plugins/composition.hpp).
#pragma once

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/cluster_config.hpp"
#include "config/toml_document.hpp"
#include "tessel/cluster.hpp"
#include "tessel/plugin.hpp"
#include "tessel/view.hpp"
#include "workloads/workload.hpp"

namespace tessel {

struct StageConfig {
  PluginKind kind = PluginKind::admission;
  std::string plugin;   // name
  std::string library;  // explicit library file (`path`), or empty
  toml::table args;     // the stage's table without `plugin` and `path`
  std::map<std::string, std::string, std::less<>> arg_where;
  std::string where;  // of the `plugin` key, or of the table
};

struct SchedulerConfig {
  SchedulerSettings settings;
  std::array<StageConfig, 4> stages;  // admission, allocation, placement, elasticity
  std::vector<std::string> plugin_path;

  const StageConfig& stage(PluginKind kind) const {
    return stages[static_cast<std::size_t>(kind) - 1];
  }
};

struct SimulationConfig {
  bool completion_at_round_end = false;  // completion = "round"
  double preemption_overhead_seconds = 0;
  double start_overhead_seconds = 0;  // at a job's first launch
};

// Random failures. Nothing fails unless configured.
struct FailureConfig {
  double node_mtbf_seconds = 0;     // mean time between failures of one node; 0: none
  double node_repair_seconds = 7200;
  // Jobs checkpoint this often while running; a crash loses the progress
  // since the last checkpoint (0: continuous checkpoints, nothing lost).
  double checkpoint_interval_seconds = 0;
  double job_failure_probability = 0;  // per attempt, at a uniformly random point of its run
  int max_retries = 4;                 // Philly retries a failed job up to 4 times
};

struct OutputConfig {
  std::string database = "results.db";
  std::string label;
  bool decisions = false;
};

struct ExperimentConfig {
  std::shared_ptr<const TomlDocument> document;
  ClusterConfig cluster;
  WorkloadConfig workload;
  SchedulerConfig scheduler;
  SimulationConfig simulation;
  FailureConfig failures;
  OutputConfig output;
};

// Throws ConfigError listing every problem.
ExperimentConfig read_experiment(std::shared_ptr<const TomlDocument> document);
// `overrides` come from --set, `sweep_overrides` from a point of the file's [sweep].
ExperimentConfig load_experiment(const std::filesystem::path& path,
                                 const std::vector<std::string>& overrides = {},
                                 const std::vector<std::string>& sweep_overrides = {});

}  // namespace tessel
