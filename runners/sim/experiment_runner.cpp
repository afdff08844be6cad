#include "experiment_runner.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "config/experiment.hpp"
#include "config/sweep.hpp"
#include "engine/errors.hpp"
#include "plugins/hosted_code.hpp"
#include "plugins/registry.hpp"
#include "results/report.hpp"
#include "results/store.hpp"
#include "simulation.hpp"
#include "workloads/workload.hpp"

namespace tessel {

ExperimentConfig load_experiment(std::shared_ptr<const TomlDocument> document) {
  Diagnostics diagnostics;
  ExperimentConfig config = read_experiment(std::move(document), diagnostics);
  check_workload(config.workload, diagnostics);
  diagnostics.raise_if_any();
  return config;
}

ExperimentConfig load_experiment(const std::filesystem::path& path, const std::vector<std::string>& overrides,
                                 const std::vector<std::string>& sweep_overrides) {
  return load_experiment(std::make_shared<const TomlDocument>(TomlDocument::load(path, overrides, sweep_overrides)));
}

namespace {

// The same mistake shows in every point of a sweep: each is reported once.
void add_once(std::vector<Diagnostic>& problems, const ConfigError& e) {
  for (const Diagnostic& d : e.diagnostics())
    if (std::find_if(problems.begin(), problems.end(), [&](const Diagnostic& p) {
          return p.where == d.where && p.message == d.message;
        }) == problems.end())
      problems.push_back(d);
}

}  // namespace

void check_schedulers(const std::vector<PlannedRun>& runs, PluginRegistry& registry) {
  std::vector<Diagnostic> problems;
  for (const PlannedRun& run : runs) {
    try {
      check_scheduler(run.config, registry);
    } catch (const ConfigError& e) {
      add_once(problems, e);
    }
  }
  if (!problems.empty()) throw ConfigError(std::move(problems));
}

ExperimentPlan plan_experiment(const ExperimentOptions& options) {
  const TomlDocument base = TomlDocument::load(options.config, options.overrides);
  std::vector<SweepPoint> points = expand_sweep(base);
  if (options.point) {
    if (*options.point >= points.size())
      throw UserError("--point " + std::to_string(*options.point) + ": " + options.config + " has " +
                      std::to_string(points.size()) + " sweep point" + (points.size() == 1 ? "" : "s") +
                      ", numbered 0 to " + std::to_string(points.size() - 1));
  }
  std::vector<PlannedRun> runs;
  std::vector<Diagnostic> problems;
  for (std::size_t index = 0; index < points.size(); ++index) {
    if (options.point && index != *options.point) continue;
    const SweepPoint& point = points[index];
    try {
      PlannedRun run{load_experiment(options.config, options.overrides, point.overrides), {}, index};
      run.info.axes = point.axes;
      run.info.fingerprint = configuration_fingerprint(*run.config.document, point);
      run.info.label = run.config.output.label.empty()
                           ? std::filesystem::path(options.config).stem().string()
                           : run.config.output.label;
      runs.push_back(std::move(run));
    } catch (const ConfigError& e) {
      add_once(problems, e);
    }
  }
  if (!problems.empty()) throw ConfigError(std::move(problems));
  std::string database = options.database.empty() ? runs.front().config.output.database : options.database;
  return ExperimentPlan{options, std::move(runs), std::move(database)};
}

std::size_t drop_complete_points(std::vector<PlannedRun>& runs, ResultsStore& store,
                                 std::vector<std::string>& notes) {
  // A point is done when a complete run of it ran the same configuration;
  // one that ran another is run again, and the user told why.
  std::map<std::pair<std::string, std::string>, std::vector<const RunRow*>> complete;
  const std::vector<RunRow> stored = store.runs();
  for (const RunRow& row : stored)
    if (row.status == "complete") complete[{row.label, row.axes}].push_back(&row);
  const std::size_t before = runs.size();
  std::erase_if(runs, [&](const PlannedRun& run) {
    const auto found = complete.find({run.info.label, run.info.axes});
    if (found == complete.end()) return false;
    for (const RunRow* row : found->second)
      if (row->fingerprint == run.info.fingerprint) return true;
    const RunRow& other = *found->second.back();
    std::string keys;
    for (const std::string& key : differing_keys(other.config, without_sweep(*run.config.document)))
      keys += (keys.empty() ? "" : ", ") + key;
    notes.push_back("point " + axes_text(run.info.axes) + ": run " + std::to_string(other.id) +
                    " ran another configuration (" +
                    (keys.empty() ? std::string("it predates fingerprints") : "it differs in " + keys) +
                    "); running it again");
    return false;
  });
  return before - runs.size();
}

ExperimentOutcome run_experiment(ExperimentPlan plan, const std::atomic<bool>* stop,
                                 const std::function<void(const ExperimentProgress&)>& on_progress) {
  const ExperimentOptions& options = plan.options;
  std::vector<PlannedRun>& runs = plan.runs;
  ExperimentOutcome outcome;
  outcome.points = runs.size();
  outcome.database = plan.database;
  std::atomic<bool> abort{false};  // a run failed: the others stop too
  std::atomic<bool> combined_stop{false};
  // Ctrl-C reaches the simulations through combined_stop, which they read
  // at every event, and the user's code that a plugin hosts (a Python
  // policy, which may loop for as long as it likes, in a call or in the
  // module it imports) through the watch, until the runs have stopped.
  HostedCodeWatch watch([&] {
    if (stop != nullptr && stop->load()) combined_stop = true;
    return combined_stop.load();
  });
  const HostedCodeWatch::Watching watching = watch.watch_this_thread();  // and as a worker, below
  // One registry for every point: each plugin is found and opened once,
  // by the first run that names it (lookups are locked).
  PluginRegistry registry(runs.front().config.scheduler.plugin_path);
  // A sweep composes every point's scheduler before anything is stored: a
  // plugin missing from its 40th point would stop it half done. A single
  // run's simulation composes it before its run row exists.
  if (runs.size() > 1) check_schedulers(runs, registry);
  create_database_folder(outcome.database);
  const OpeningStore store(outcome.database);

  if (options.resume) outcome.skipped = drop_complete_points(runs, store.get(), outcome.notes);
  outcome.runs.assign(runs.size(), 0);
  if (runs.empty()) return outcome;

  const unsigned threads = std::max(1u, std::min<unsigned>(
      options.parallel ? options.parallel : std::max(1u, std::thread::hardware_concurrency()),
      static_cast<unsigned>(runs.size())));
  std::atomic<std::size_t> next{0};
  std::mutex mutex;  // guards progress, first_error and interruption
  ExperimentProgress progress{0, runs.size(), outcome.skipped, 0};
  std::exception_ptr first_error;
  // What stopped (the first cause that says more than "interrupted": a
  // policy's code, a plugin as it loaded), with every run the stop marked
  // 'interrupted' counted.
  std::optional<Interrupted> interruption;
  const auto started = std::chrono::steady_clock::now();

  auto work = [&] {
    while (true) {
      const std::size_t i = next++;
      if (i >= runs.size() || combined_stop.load()) return;
      try {
        outcome.runs[i] = run_simulation(runs[i].config, registry, store, runs[i].info, combined_stop);
      } catch (const Interrupted& e) {
        // Ctrl-C, or hosted code that stopped itself (a policy raised KeyboardInterrupt): all stop.
        std::lock_guard lock(mutex);
        const bool keep_cause = interruption && (interruption->says_what_stopped() || !e.says_what_stopped());
        const Interrupted& told = keep_cause ? *interruption : e;
        interruption = told.marking((interruption ? interruption->runs_marked() : 0) + e.runs_marked());
        combined_stop = true;
        return;
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!first_error) first_error = std::current_exception();
        abort = true;
        combined_stop = true;
        return;
      }
      std::lock_guard lock(mutex);
      ++progress.done;
      progress.elapsed_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (on_progress) on_progress(progress);
    }
  };
  // This thread is one of the workers: a single run starts no thread for
  // its simulation, and allocates from memory that reading its
  // configuration has already touched.
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t)
    pool.emplace_back([&] {
      const HostedCodeWatch::Watching watching = watch.watch_this_thread();
      work();
    });
  work();
  for (std::thread& t : pool) t.join();

  if (first_error) std::rethrow_exception(first_error);
  // A Ctrl-C that came as the last run was being stored interrupted nothing.
  if (combined_stop.load() && !abort.load() && progress.done < runs.size()) {
    if (interruption) throw *interruption;
    // Between runs: none was under way.
    throw Interrupted("interrupted after " + std::to_string(progress.done) + " of " + std::to_string(runs.size()) +
                      " runs");
  }
  return outcome;
}

}  // namespace tessel
