// Running an experiment file: one run, or one run per point of its [sweep],
// in parallel, into one results database.
//
// Every point's config is read and checked, and its scheduler composed,
// before any run starts, so a mistake in the 40th point costs nothing. With `resume`, points that
// already have a complete run in the database (same label, axes and
// configuration fingerprint) are skipped. When `stop` is raised (Ctrl-C), running simulations stop at
// their next event and are marked 'interrupted'; no run is left 'running'.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/experiment.hpp"
#include "results/store.hpp"

namespace tessel {

class PluginRegistry;

// Reads one experiment file (with --set `overrides`, and `sweep_overrides`
// from a point of its [sweep]) into plain settings, and has the workload
// and model rooms check what only they know (check_workload): every problem,
// located, in one ConfigError.
ExperimentConfig load_experiment(const std::filesystem::path& path,
                                 const std::vector<std::string>& overrides = {},
                                 const std::vector<std::string>& sweep_overrides = {});
// The same, from a document already parsed.
ExperimentConfig load_experiment(std::shared_ptr<const TomlDocument> document);

struct ExperimentOptions {
  std::string config;                  // the experiment TOML file
  std::vector<std::string> overrides;  // --set, applied before each point's own
  std::string database;                // empty: [output] database
  unsigned parallel = 0;               // simulations at once; 0: one per core
  bool resume = false;
  std::optional<std::size_t> point;    // run this sweep point alone (numbered from 0, in sweep order)
};

struct ExperimentProgress {
  std::size_t done = 0;     // runs finished in this invocation
  std::size_t total = 0;    // runs to do in this invocation
  std::size_t skipped = 0;  // complete already (--resume)
  double elapsed_seconds = 0;
};

struct ExperimentOutcome {
  std::string database;
  std::vector<std::int64_t> runs;  // this invocation's, in point order
  std::size_t points = 0;
  std::size_t skipped = 0;
  std::vector<std::string> notes;  // what the user should know: points run again, and why
};

struct PlannedRun {
  ExperimentConfig config;
  RunInfo info;           // label and axes
  std::size_t point = 0;  // its place in the sweep, as --point numbers it
};

// The runs an experiment file asks for, each with its config read and checked.
struct ExperimentPlan {
  ExperimentOptions options;
  std::vector<PlannedRun> runs;  // one per sweep point, in point order
  std::string database;
};

// Reads every point's config. Throws ConfigError listing each problem once;
// UserError for a `point` the sweep does not have. No plugin is opened yet.
ExperimentPlan plan_experiment(const ExperimentOptions& options);

// Composes each run's scheduler (check_scheduler). Throws ConfigError
// listing each problem once.
void check_schedulers(const std::vector<PlannedRun>& runs, PluginRegistry& registry);

// --resume: drops the runs whose point has a complete run in `store` of the
// same configuration; a point that ran another configuration stays, with a
// note saying why it runs again. Returns how many were dropped.
std::size_t drop_complete_points(std::vector<PlannedRun>& runs, ResultsStore& store,
                                 std::vector<std::string>& notes);

// Runs the plan. Throws UserError (a trace, a plugin, the database), Interrupted.
ExperimentOutcome run_experiment(ExperimentPlan plan, const std::atomic<bool>* stop,
                                 const std::function<void(const ExperimentProgress&)>& on_progress = {});

}  // namespace tessel
