// An experiment: one TOML file (plus --set overrides) read into plain
// settings for every section. Reading checks every key against what the
// engine reads and reports all problems at once (ConfigError, exit code 2).
// The keys of a workload kind and of a throughput model are left for the
// rooms that build those (workload_settings.hpp): the experiment loader
// (runners/sim) has them checked, after reading, into the same report.
//
//   [cluster]     the simulated machines and their planned changes (cluster_config.hpp)
//   [workload]    where jobs come from (workload_settings.hpp; built by workloads/)
//   [scheduler]   the round length and the four plugins with their arguments
//   [simulation]  fidelity knobs of the simulator
//   [failures]    random node and job failures
//   [output]      where results go
//   [serve]       the real-cluster daemon (`tessel serve`); simulations ignore it
//
// `tessel serve` reads the same file with load_served_experiment: nodes come
// from the agents that register and jobs from `tessel submit`, so [cluster],
// [workload], [simulation] and [failures] are left unread there.
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
#include "config/workload_settings.hpp"
#include "tessel/cluster.hpp"
#include "tessel/plugin.hpp"
#include "tessel/view.hpp"

namespace tessel {

struct StageConfig {
  PluginKind kind = PluginKind::admission;
  std::string plugin;   // name
  std::string library;  // explicit library file (`path`), or empty
  toml::table args;     // the stage's table without `plugin` and `path`
  std::map<std::string, std::string, std::less<>> arg_where;
  std::string where;  // of the `plugin` key, or of the table
};

// How the core treats the jobs running when a round begins ([scheduler]).
struct RoundRules {
  // left_out = "stop": a running job that the allocation plan denies (0
  // GPUs) or leaves unranked is stopped at the start of placement, as every
  // lease ends with its round in Synergy's simulator (JobLeaseEndEvent).
  // "keep" (default): it runs on until a ranked job needs what it holds.
  bool stop_left_out = false;
  // placement_each_round = "every_round": every running job gives up what it holds and
  // is placed again by the placement plugin, in the plan's rank order, as
  // Synergy's simulator re-places every job each round; one placed on the
  // same GPUs with the same grant runs on, one placed elsewhere restarts
  // there (a preemption), one not placed stops. "sticky" (default): a
  // running job keeps its GPUs unless its grant changes. Needs left_out = "stop".
  bool place_every_round = false;
};

struct SchedulerConfig {
  SchedulerSettings settings;
  RoundRules rules;
  std::array<StageConfig, 4> stages;  // admission, allocation, placement, elasticity
  std::vector<std::string> plugin_path;

  const StageConfig& stage(PluginKind kind) const {
    return stages[static_cast<std::size_t>(kind) - 1];
  }
};

struct SimulationConfig {
  // completion = "round" or "exact-held": a job's GPUs are held until the
  // end of the round in which it finishes.
  bool completion_at_round_end = false;
  // completion = "exact" or "exact-held": its finish is recorded when its
  // work is done, not when its GPUs are released (Gavel's simulator).
  bool finish_at_exact_time = true;
  // progress = "whole_iterations": a running job advances floor(round x
  // rate / iteration) whole iterations per round (Synergy's Job.allocate),
  // the iteration's size from the throughput model (iteration_work).
  bool whole_iterations = false;
  std::string progress_where;  // of the `progress` key, for errors found once the model is built
  // rate_change_times = "whole_seconds": a job reaches each point where its
  // rate changes (Pollux: an epoch end), and its completion, at the nearest
  // whole second of when it would, as Pollux's simulator's Job.step rounds
  // the time to each epoch end.
  bool rate_changes_on_whole_seconds = false;
  // rounds = "events": a round at each arrival, completion, failure or
  // cluster change, and when the allocation plan asks to be revisited
  // (AllocationPlan::revisit_at), instead of every round_seconds.
  bool event_rounds = false;
  std::string rounds_where;  // of the `rounds` key, for errors found once the plugins are composed
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

struct ServeConfig {
  std::string listen = "127.0.0.1:7461";  // HOST:PORT; port 0 picks a free one
  std::string secret_file;                 // relative to the config file; empty: none given
  // TLS (runners/cluster/tls.hpp): by default a key derived from the secret;
  // X.509 when tls_cert, tls_key and tls_ca (paths relative to the config
  // file) are all given; plaintext only with insecure = true.
  bool insecure = false;
  std::string tls_cert, tls_key, tls_ca;
  double heartbeat_seconds = 1;            // how often agents report
  // An agent silent this long is down: the scheduler stops placing jobs on
  // its node, and the agent stops its jobs itself (see runners/cluster).
  double node_timeout_seconds = 10;
  double grace_seconds = 10;  // SIGTERM, then SIGKILL this much later
  // A frame must arrive whole within this many seconds of its first byte,
  // or its connection is closed: a peer that announces a frame and stalls
  // holds no buffer for longer (see runners/cluster/connection.hpp).
  double frame_timeout_seconds = 10;
  // Bytes of unfinished frames the daemon holds over all its connections;
  // a connection whose bytes would pass it is closed.
  int max_buffered_mib = 256;
  int max_retries = 3;        // failed attempts before a job is given up
  // A failed attempt's job waits this long before its next launch, doubled
  // after each further failure up to retry_max_seconds: a job that crashes
  // at once is not relaunched back to back.
  double retry_seconds = 1;
  double retry_max_seconds = 60;
  int master_port_first = 29500;  // MASTER_PORT comes from this range
  int master_port_last = 29999;
  // Who runs the ranks the scheduler decides: "agents" (`tessel agent` on
  // each node) or "slurm" (a Slurm job per launch: runners/cluster/slurm_executor.hpp).
  std::string executor = "agents";
  // Slurm only. The partition whose nodes the scheduler uses (empty: all
  // nodes sinfo lists), and the folder, on a filesystem every node shares,
  // that holds the ranks' logs, progress files and batch scripts (empty:
  // `<database>.slurm`, beside the database).
  std::string slurm_partition;
  std::string slurm_log_dir;
  // Prices remaining work for size-aware policies (work is in iterations).
  ModelSettings model;
};

struct ExperimentConfig {
  std::shared_ptr<const TomlDocument> document;
  ClusterConfig cluster;
  WorkloadSettings workload;
  SchedulerConfig scheduler;
  SimulationConfig simulation;
  FailureConfig failures;
  OutputConfig output;
  ServeConfig serve;
};

// Reports every problem to `diagnostics`.
ExperimentConfig read_experiment(std::shared_ptr<const TomlDocument> document, Diagnostics& diagnostics);
// The same; throws ConfigError listing every problem.
ExperimentConfig read_experiment(std::shared_ptr<const TomlDocument> document);

// For `tessel serve`: [scheduler], [output] and [serve] only; `cluster`,
// `workload`, `simulation` and `failures` stay default and unread. The
// serve model's arguments are the daemon's to check (build_throughput_model).
ExperimentConfig load_served_experiment(const std::filesystem::path& path,
                                        const std::vector<std::string>& overrides = {});

}  // namespace tessel
