#include "commands.hpp"

#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <span>

#include "config/experiment.hpp"
#include "engine/errors.hpp"
#include "plugins/composition.hpp"
#include "plugins/registry.hpp"
#include "results/report.hpp"
#include "results/store.hpp"
#include "simulation.hpp"

namespace tessel::cli {

namespace {

std::string cluster_text(const ExperimentConfig& config) {
  int gpus = 0;
  for (const NodeSpec& node : config.cluster.nodes) gpus += node.gpus;
  return std::to_string(config.cluster.nodes.size()) + " nodes, " + std::to_string(gpus) + " GPUs";
}

std::string composition_text(const SchedulerConfig& scheduler) {
  std::string text;
  for (const StageConfig& stage : scheduler.stages)
    text += (text.empty() ? "" : " -> ") + stage.plugin;
  return text;
}

}  // namespace

int run(const RunOptions& options, const std::atomic<bool>& stop) {
  const ExperimentConfig config = load_experiment(options.config, options.overrides);
  PluginRegistry registry(config.scheduler.plugin_path);
  const std::string database = options.database.empty() ? config.output.database : options.database;
  if (const auto parent = std::filesystem::path(database).parent_path(); !parent.empty())
    std::filesystem::create_directories(parent);
  ResultsStore store(database);
  if (!options.quiet)
    std::cerr << "tessel: simulating " << options.config << " on " << cluster_text(config) << " with "
              << composition_text(config.scheduler) << "\n";
  const std::int64_t id = run_simulation(config, registry, store, RunInfo{}, &stop);
  if (!options.quiet) {
    print_report(std::cout, load_reports(store, {id}), ReportFormat::table);
    std::cout << "results: " << database << " (run " << id << ")\n";
  }
  return 0;
}

int validate(const std::string& path, const std::vector<std::string>& overrides) {
  const ExperimentConfig config = load_experiment(path, overrides);
  PluginRegistry registry(config.scheduler.plugin_path);
  Simulation simulation(config, registry);  // composes the plugins and reads the workload
  for (const std::string& note : simulation.notes()) std::cerr << "note: " << note << "\n";
  std::cout << path << ": ok: " << simulation.job_count() << " jobs on " << cluster_text(config)
            << ", " << composition_text(config.scheduler) << "\n";
  return 0;
}

int plugins(const PluginsOptions& options) {
  PluginRegistry registry(options.directories);
  const auto& all = registry.plugins();
  std::size_t name_width = 4;
  for (const PluginEntry& p : all) name_width = std::max(name_width, std::string_view(p.info->name).size());
  bool any = false;
  for (const PluginKind kind :
       {PluginKind::admission, PluginKind::allocation, PluginKind::placement, PluginKind::elasticity}) {
    if (!options.kind.empty() && options.kind != to_string(kind)) continue;
    std::vector<const PluginEntry*> entries;
    for (const PluginEntry& p : all)
      if (p.info->kind == kind) entries.push_back(&p);
    std::sort(entries.begin(), entries.end(),
              [](auto* a, auto* b) { return std::string_view(a->info->name) < b->info->name; });
    if (entries.empty()) continue;
    std::cout << (any ? "\n" : "") << to_string(kind) << ":\n";
    any = true;
    for (const PluginEntry* p : entries) {
      std::cout << "  " << std::left << std::setw(static_cast<int>(name_width)) << p->info->name << "  "
                << std::setw(5) << p->info->version << "  " << p->info->description << "\n";
      if (!options.verbose) continue;
      std::cout << "      file: " << p->path << "\n";
      for (const ArgSpec& arg : std::span(p->info->args, p->info->arg_count)) {
        std::cout << "      " << arg.name << " (" << to_string(arg.type)
                  << (arg.default_value ? std::string(", default ") + arg.default_value : std::string(", required"))
                  << (arg.choices ? std::string(", one of ") + arg.choices : std::string()) << "): " << arg.help
                  << "\n";
      }
    }
  }
  if (!options.kind.empty() && !any)
    std::cout << "no " << options.kind << " plugins found\n";
  for (const RejectedFile& file : registry.rejected()) std::cerr << "refused " << file.message << "\n";
  if (options.verbose) {
    std::cout << "\nsearch path:\n";
    for (const std::string& dir : registry.search_path()) std::cout << "  " << dir << "\n";
  }
  return 0;
}

int report(const ReportOptions& options) {
  if (!std::filesystem::exists(options.database))
    throw UserError(options.database + ": no such results database");
  ResultsStore store(options.database, /*create=*/false);
  const auto reports = load_reports(store, options.runs);
  if (reports.empty()) {
    std::cerr << options.database << ": no runs yet\n";
    return 0;
  }
  const ReportFormat format = options.format == "csv"    ? ReportFormat::csv
                              : options.format == "json" ? ReportFormat::json
                                                         : ReportFormat::table;
  print_report(std::cout, reports, format);
  return 0;
}

}  // namespace tessel::cli
