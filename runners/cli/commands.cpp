#include "commands.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <tuple>
#include <regex>
#include <set>
#include <span>

#include <nlohmann/json.hpp>

#include "config/experiment.hpp"
#include "config/toml_document.hpp"
#include "engine/errors.hpp"
#include "plugins/composition.hpp"
#include "plugins/hosted_code.hpp"
#include "plugins/registry.hpp"
#include "results/explain.hpp"
#include "results/plot.hpp"
#include "results/report.hpp"
#include "results/store.hpp"
#include "experiment_runner.hpp"
#include "slurm_sweep.hpp"
#include "results/merge.hpp"
#include "models/models.hpp"
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

namespace {

// "[#########.........] 12/40 runs, ETA 1m23s", redrawn in place on a terminal.
void draw_progress(const ExperimentProgress& p) {
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * p.done / std::max<std::size_t>(1, p.total));
  const double eta = p.done ? p.elapsed_seconds * static_cast<double>(p.total - p.done) / p.done : 0;
  const long seconds = std::lround(eta);
  std::cerr << "\r[" << std::string(filled, '#') << std::string(kWidth - filled, '.') << "] " << p.done << "/"
            << p.total << " runs, ETA " << (seconds >= 60 ? std::to_string(seconds / 60) + "m" : "")
            << seconds % 60 << "s   " << std::flush;
  if (p.done == p.total) std::cerr << "\n";
}

}  // namespace

namespace {

// The sweep as a Slurm job array; with --wait, its progress and then its report.
int run_on_slurm(const RunOptions& options, ExperimentPlan plan, const std::atomic<bool>& stop) {
  SlurmSweepOptions slurm{{}, options.max_parallel};
  // "--partition=cpu --time=1:00:00", or "-p cpu": one option per #SBATCH
  // line, a word not starting with '-' being the value of the one before.
  for (const std::string& text : options.slurm_options) {
    std::istringstream words(text);
    bool first = true;
    for (std::string word; words >> word; first = false) {
      if (!first && word.front() != '-')
        slurm.sbatch_options.back() += " " + word;
      else
        slurm.sbatch_options.push_back(word);
    }
  }
  const SlurmSweep sweep = submit_slurm_sweep(std::move(plan), slurm);
  for (const std::string& note : sweep.notes) std::cerr << "tessel: " << note << "\n";
  if (sweep.runs.empty()) {
    std::cerr << "tessel: all " << sweep.points << " points have a complete run in " << sweep.database
              << " already; nothing to submit\n";
    return 0;
  }
  if (!options.quiet) {
    std::cerr << "tessel: submitted " << sweep.runs.size() << " of " << sweep.points << " points of " << options.config
              << " to Slurm as job array " << sweep.array_job << ", then merge job " << sweep.merge_job
              << "; scripts and logs in " << sweep.shards.string() << "\n";
  }
  if (!options.wait) {
    if (!options.quiet)
      std::cout << "results: " << sweep.database << " (once job " << sweep.merge_job << " has merged them)\n";
    return 0;
  }
  const bool terminal = isatty(STDERR_FILENO) && !options.quiet;
  try {
    wait_for_slurm_sweep(sweep, &stop, terminal ? draw_progress : std::function<void(const ExperimentProgress&)>{});
  } catch (const Interrupted&) {
    std::cerr << "tessel: stopped waiting; the jobs go on in Slurm (scancel " << sweep.array_job << " "
              << sweep.merge_job << " stops them)\n";
    return 130;
  }
  if (!std::filesystem::exists(sweep.database))
    throw UserError(sweep.database + ": the merge job wrote nothing; see " +
                    (sweep.shards / "logs" / "merge.out").string());
  // A point is done when OUT has a complete run of it of this configuration.
  ResultsStore store(sweep.database, /*create=*/false);
  std::map<std::tuple<std::string, std::string, std::string>, std::int64_t> complete;
  for (const RunRow& row : store.runs())
    if (row.status == "complete") complete[{row.label, row.axes, row.fingerprint}] = row.id;
  std::vector<std::int64_t> ids;
  std::string unfinished;
  for (const PlannedRun& run : sweep.runs) {
    const auto found = complete.find({run.info.label, run.info.axes, run.info.fingerprint});
    if (found != complete.end())
      ids.push_back(found->second);
    else
      unfinished += (unfinished.empty() ? "" : ", ") + std::to_string(run.point) + " " + axes_text(run.info.axes);
  }
  if (!options.quiet && !ids.empty()) {
    print_report(std::cout, load_reports(store, ids), ReportFormat::table);
    std::cout << "results: " << sweep.database << "\n";
  }
  if (unfinished.empty()) return 0;
  std::cerr << "tessel: " << sweep.runs.size() - ids.size() << " of " << sweep.runs.size()
            << " points have no complete run in " << sweep.database << " (points " << unfinished
            << "); their logs are in " << (sweep.shards / "logs").string()
            << "; run again with --resume to run only those\n";
  return 1;
}

}  // namespace

int run(const RunOptions& options, const std::atomic<bool>& stop) {
  ExperimentPlan plan = plan_experiment(
      {options.config, options.overrides, options.database, options.parallel, options.resume, options.point});
  if (options.list_points) {
    for (const PlannedRun& run : plan.runs) std::cout << run.point << "\t" << axes_text(run.info.axes) << "\n";
    return 0;
  }
  if (options.slurm) return run_on_slurm(options, std::move(plan), stop);
  if (!options.quiet) {
    const ExperimentConfig& first = plan.runs.front().config;
    std::cerr << "tessel: simulating " << options.config;
    if (plan.runs.size() > 1) std::cerr << " (" << plan.runs.size() << " runs)";
    std::cerr << " on " << cluster_text(first) << " with " << composition_text(first.scheduler) << "\n";
  }
  const bool terminal = isatty(STDERR_FILENO) && !options.quiet;
  const ExperimentOutcome outcome = run_experiment(
      std::move(plan), &stop, terminal ? draw_progress : std::function<void(const ExperimentProgress&)>{});
  for (const std::string& note : outcome.notes) std::cerr << "tessel: " << note << "\n";
  if (options.quiet) return 0;
  if (outcome.skipped > 0)
    std::cerr << "tessel: " << outcome.skipped << " of " << outcome.points
              << " runs were complete already; skipped them\n";
  ResultsStore store(outcome.database);
  std::vector<std::int64_t> ids;
  for (std::int64_t id : outcome.runs)
    if (id > 0) ids.push_back(id);
  if (!ids.empty()) print_report(std::cout, load_reports(store, ids), ReportFormat::table);
  std::cout << "results: " << outcome.database;
  if (ids.size() == 1) std::cout << " (run " << ids.front() << ")";
  if (ids.size() > 1)  // parallel runs take their ids in the order they start
    std::cout << " (runs " << *std::min_element(ids.begin(), ids.end()) << "-"
              << *std::max_element(ids.begin(), ids.end()) << ")";
  std::cout << "\n";
  return 0;
}

int merge(const std::string& output, const std::vector<std::string>& shards) {
  const MergeOutcome outcome = merge_databases(output, shards);
  for (const std::string& note : outcome.notes) std::cerr << "tessel: " << note << "\n";
  std::cout << "merged " << outcome.copied << " run" << (outcome.copied == 1 ? "" : "s") << " from " << shards.size()
            << " database" << (shards.size() == 1 ? "" : "s") << " into " << output;
  if (outcome.present > 0) std::cout << " (" << outcome.present << " there already)";
  std::cout << "\n";
  return 0;
}

int validate(const std::string& path, const std::vector<std::string>& overrides, const std::atomic<bool>& stop) {
  // Composing each point imports its policies' modules, whose code may loop.
  HostedCodeWatch watch([&] { return stop.load(); });
  const HostedCodeWatch::Watching watching = watch.watch_this_thread();
  // Ctrl-C between points, or caught by a policy's code, stops the check
  // too: nothing was checked whole, so nothing is said to be ok.
  auto unless_stopped = [&] {
    if (stop.load()) throw Interrupted("interrupted; " + path + " was not checked whole");
  };
  ExperimentOptions options;
  options.config = path;
  options.overrides = overrides;
  const ExperimentPlan plan = plan_experiment(options);  // every point of the sweep read
  unless_stopped();
  PluginRegistry registry(plan.runs.front().config.scheduler.plugin_path);
  if (plan.runs.size() > 1) check_schedulers(plan.runs, registry);  // each problem once, as `run` says them
  std::set<std::string> noted;
  std::string first;  // what the first point runs
  for (const PlannedRun& run : plan.runs) {
    unless_stopped();
    Simulation simulation(run.config, registry);  // composes the plugins and reads the workload
    for (const std::string& note : simulation.notes())
      if (noted.insert(note).second) std::cerr << "note: " << note << "\n";
    if (first.empty())
      first = (simulation.endless() ? std::string("jobs until the tracked ones are done")
                                    : std::to_string(simulation.job_count()) + " jobs") +
              " on " + cluster_text(run.config) + ", " + composition_text(run.config.scheduler);
  }
  unless_stopped();
  std::cout << path << ": ok: "
            << (plan.runs.size() == 1 ? first
                                      : std::to_string(plan.runs.size()) +
                                            " sweep points, each composed and its workload read; point 0: " + first)
            << "\n";
  return 0;
}

namespace {

// What an argument's choices allow, in words: the kClusterGpuTypes marker
// depends on the cluster, so it is said rather than printed.
std::string choices_text(const std::string& choices) {
  if (choices.empty()) return "";
  if (choices == kClusterGpuTypes) return ", GPU types of the cluster";
  return ", one of " + choices;
}

void print_arguments(std::span<const ArgDeclaration> declarations, std::string_view indent) {
  for (const ArgDeclaration& arg : declarations)
    std::cout << indent << arg.name << " (" << to_string(arg.type)
              << (arg.default_value ? ", default " + *arg.default_value : std::string(", required"))
              << choices_text(arg.choices) << "): " << arg.help << "\n";
}

// The classes defined at the top level of a Python file, by their `class` lines.
std::vector<std::string> python_classes(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw UserError(path + ": cannot read this Python file");
  static const std::regex definition(R"(^class\s+([A-Za-z_]\w*))");
  std::vector<std::string> classes;
  std::smatch match;
  for (std::string line; std::getline(file, line);)
    if (std::regex_search(line, match, definition)) classes.push_back(match[1]);
  return classes;
}

// A plugin that hosts code (the Python bridge): the classes of `files` it
// can run, with the arguments each declares.
void print_hosted(const PluginEntry& plugin, const std::vector<std::string>& files, const std::atomic<bool>& stop) {
  if (files.empty()) {
    std::cout << "      and the arguments its hosted code declares (--python FILE lists them)\n";
    return;
  }
  // Declaring the arguments imports each file, whose module's code may loop.
  // Ctrl-C, even one the module caught, stops the listing where it is.
  HostedCodeWatch watch([&] { return stop.load(); });
  const HostedCodeWatch::Watching watching = watch.watch_this_thread();
  auto unless_stopped = [&] {
    if (stop.load()) throw Interrupted("interrupted; the Python files' classes were not all listed");
  };
  for (const std::string& file : files)
    for (const std::string& name : python_classes(file)) {
      PluginArgs args;
      args.set("module", file);
      args.set("class", name);
      SlotRegistry no_slots;
      std::vector<ArgDeclaration> declared;
      FactoryError error;
      const bool declared_them = plugin.declare_arguments(PluginContext(args, 0, no_slots), declared, error);
      if (!declared_them && error.interrupted) throw Interrupted(interrupted_loading(plugin.info, error));
      unless_stopped();
      if (!declared_them) {
        if (error.message.find("has no method") == std::string::npos)  // not a policy of this stage
          std::cerr << "tessel: " << error.message << "\n";
        continue;
      }
      std::cout << "      class " << name << " in " << file << (declared.empty() ? " (takes no arguments)" : ":")
                << "\n";
      print_arguments(declared, "        ");
    }
}

}  // namespace

int plugins(const PluginsOptions& options, const std::atomic<bool>& stop) {
  PluginRegistry registry(options.directories);
  const auto& all = registry.plugins();
  std::size_t name_width = 4;
  for (const PluginEntry& p : all) name_width = std::max(name_width, std::string_view(p.info.name).size());
  bool any = false;
  for (const PluginKind kind :
       {PluginKind::admission, PluginKind::allocation, PluginKind::placement, PluginKind::elasticity}) {
    if (!options.kind.empty() && options.kind != to_string(kind)) continue;
    std::vector<const PluginEntry*> entries;
    for (const PluginEntry& p : all)
      if (p.info.kind == kind) entries.push_back(&p);
    std::sort(entries.begin(), entries.end(),
              [](auto* a, auto* b) { return std::string_view(a->info.name) < b->info.name; });
    if (entries.empty()) continue;
    std::cout << (any ? "\n" : "") << to_string(kind) << ":\n";
    any = true;
    for (const PluginEntry* p : entries) {
      std::cout << "  " << std::left << std::setw(static_cast<int>(name_width)) << p->info.name << "  "
                << std::setw(5) << p->info.version << "  " << p->info.description << "\n";
      if (!options.verbose) continue;
      std::cout << "      file: " << p->path << "\n";
      print_arguments(p->arguments, "      ");
      if (p->declare_arguments != nullptr) print_hosted(*p, options.python_files, stop);
    }
  }
  if (!options.kind.empty() && !any)
    std::cout << "no " << options.kind << " plugins found\n";
  // A name defined by two files is unusable until one goes: an error, not a note.
  bool duplicates = false;
  for (const RejectedFile& file : registry.rejected()) {
    duplicates |= file.error == LoadError::duplicate_name;
    std::cerr << (file.error == LoadError::duplicate_name ? "tessel: " : "refused ") << file.message << "\n";
  }
  if (options.verbose) {
    std::cout << "\nsearch path:\n";
    for (const std::string& dir : registry.search_path()) std::cout << "  " << dir << "\n";
  }
  return duplicates ? 2 : 0;
}

namespace {
ResultsStore open_existing(const std::string& database) {
  if (!std::filesystem::exists(database)) throw UserError(database + ": no such results database");
  if (std::filesystem::is_directory(database)) throw UserError(database + ": a directory, not a results database");
  return ResultsStore(database, /*create=*/false);
}

// A run given twice would be reported, or plotted, twice.
void check_run_ids(const std::vector<std::int64_t>& runs) {
  for (auto run = runs.begin(); run != runs.end(); ++run)
    if (std::find(runs.begin(), run, *run) != run) throw UserError("--run " + std::to_string(*run) + " is given twice");
}

}  // namespace

int report(const ReportOptions& options) {
  check_run_ids(options.runs);
  ResultsStore store = open_existing(options.database);
  const JobGrouping grouping = options.group == "vc" ? JobGrouping::vc : JobGrouping::none;
  const auto reports = load_reports(store, options.runs, grouping);
  if (reports.empty()) {
    std::cerr << options.database << ": no runs yet\n";
    return 0;
  }
  const ReportFormat format = options.format == "csv"    ? ReportFormat::csv
                              : options.format == "json" ? ReportFormat::json
                                                         : ReportFormat::table;
  if (options.by.empty())
    print_report(std::cout, reports, format, grouping);
  else
    print_grouped_report(std::cout, group_by_axis(reports, options.by, options.over), options.by, format, grouping);
  return 0;
}

int compare(const std::string& database, std::int64_t run_a, std::int64_t run_b) {
  ResultsStore store = open_existing(database);
  const auto reports = load_reports(store, {run_a, run_b});
  for (const RunReport& report : reports)  // its zeros would read as results
    if (report.run.status == "failed" || report.run.status == "interrupted")
      throw UserError(database + ": run " + std::to_string(report.run.id) + " is " + report.run.status +
                      " and stored no results to compare" +
                      (report.run.note.empty() ? "" : " (" + report.run.note + ")"));
  print_comparison(std::cout, reports[0], reports[1]);
  return 0;
}

int explain(const std::string& database, std::int64_t job, std::optional<std::int64_t> run,
            std::optional<double> from, std::optional<double> to, const std::string& stage) {
  for (const auto& [name, bound] : {std::pair{"--from", from}, std::pair{"--to", to}})
    if (bound && !std::isfinite(*bound)) throw UserError(std::string(name) + ": not a time: " + std::to_string(*bound));
  if (from && to && *from > *to)
    throw UserError("--from " + std::to_string(*from) + " is after --to " + std::to_string(*to) + ": no time is in both");
  ResultsStore store = open_existing(database);
  if (!run) {
    const auto runs = store.runs();
    if (runs.empty()) throw UserError(database + ": no runs yet");
    run = runs.back().id;
  }
  ExplainFilter filter{from, to, std::nullopt};
  for (const PluginKind kind :
       {PluginKind::admission, PluginKind::allocation, PluginKind::placement, PluginKind::elasticity})
    if (stage == to_string(kind)) filter.stage = kind;
  print_explanation(std::cout, store, *run, static_cast<JobId>(job), filter);
  return 0;
}

int plot(const PlotOptions& options) {
  ResultsStore store = open_existing(options.database);
  check_run_ids(options.runs);
  PlotRequest request{options.kind, options.runs, options.metric, options.by, options.over, options.output};
  if (request.output.empty())
    request.output = std::filesystem::path(options.database).stem().string() + "-" + options.kind + ".svg";
  tessel::plot(store, request);
  std::cout << "wrote " << request.output << "\n";
  return 0;
}

namespace {

// One [[case]] of a `tessel price` file.
struct PriceCase {
  std::string name;
  std::shared_ptr<const ThroughputModel> model;
  JobSpec job;
  Shape shape;
};

std::vector<PriceCase> read_price_cases(const std::string& path) {
  const auto document = std::make_shared<const TomlDocument>(TomlDocument::load(path));
  Diagnostics diagnostics;
  TableReader root(*document, diagnostics, &document->root(), "");
  std::vector<PriceCase> cases;
  const toml::array* rows = root.node("case") ? root.node("case")->as_array() : nullptr;
  if (!rows || rows->empty()) root.error("case", "needs at least one [[case]]");
  for (std::size_t i = 0; rows && i < rows->size(); ++i) {
    TableReader row = root.nested((*rows)[i].as_table(), "case[" + std::to_string(i) + "]");
    PriceCase c;
    c.name = row.string("name", std::nullopt).value_or("");
    c.model = build_throughput_model(read_model_settings(row, document), diagnostics);
    c.job.parameters = row.number("parameters", 0.0, 0).value_or(0);
    c.job.batch_size = static_cast<int>(row.integer("batch_size", 0, 0).value_or(0));
    c.shape.gpus = static_cast<int>(row.integer("gpus", std::nullopt, 1).value_or(1));
    c.shape.nodes = static_cast<int>(row.integer("nodes", 1, 1).value_or(1));
    c.shape.gpu_type = row.string("gpu_type", std::nullopt).value_or("");
    c.shape.gpu_mem_gb = row.number("gpu_mem_gb", std::nullopt, 0).value_or(0);
    c.shape.layout.tensor_parallel = static_cast<int>(row.integer("tensor_parallel", 0, 0).value_or(0));
    c.shape.layout.pipeline_parallel = static_cast<int>(row.integer("pipeline_parallel", 0, 0).value_or(0));
    c.job.gpus = c.job.min_gpus = c.job.max_gpus = c.shape.gpus;
    // The simulator's shapes hold these by construction; a written one may
    // not, and the model would price it quietly (data_parallel rounds down,
    // a lone tp or pp is dropped for the model's own choice).
    const int tp = c.shape.layout.tensor_parallel, pp = c.shape.layout.pipeline_parallel;
    if ((tp > 0) != (pp > 0))
      row.error(tp > 0 ? "tensor_parallel" : "pipeline_parallel",
                "'tensor_parallel' and 'pipeline_parallel' in [" + row.table_name() +
                    "] go together: both, or neither for the model's best split");
    else if (tp > 0 && c.shape.gpus % (tp * pp) != 0)
      row.error("tensor_parallel", "tensor_parallel x pipeline_parallel (" + std::to_string(tp * pp) + ") in [" +
                                       row.table_name() + "] must divide gpus (" + std::to_string(c.shape.gpus) + ")");
    if (c.shape.nodes > c.shape.gpus)
      row.error("nodes", "'nodes' in [" + row.table_name() + "] is " + std::to_string(c.shape.nodes) +
                             ", more than its " + std::to_string(c.shape.gpus) + " GPUs");
    row.finish();
    if (c.model) {
      NodeSpec node;
      node.gpu_type = c.shape.gpu_type;
      if (std::string why = c.model->check(ClusterState({node})); !why.empty()) row.error("model", why);
    }
    cases.push_back(std::move(c));
  }
  root.finish();
  diagnostics.raise_if_any();
  return cases;
}

}  // namespace

int price(const std::string& path, const std::string& format) {
  if (format != "table" && format != "json") throw UserError("--format: 'table' or 'json', not '" + format + "'");
  const std::string series = std::filesystem::path(path).stem().string();
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const PriceCase& c : read_price_cases(path)) {
    nlohmann::ordered_json row;
    row["series"] = series;
    row["case"] = c.name;
    const double rate = c.model->rate(c.job, c.shape);
    row["steps_per_s"] = rate;
    if (const auto* flops = dynamic_cast<const FlopCount*>(c.model.get()))
      row["flops_per_gpu"] = flops->flops_per_unit(c.job, c.shape) * rate / c.shape.gpus;
    rows.push_back(std::move(row));
  }
  if (format == "json") {
    std::cout << rows.dump(2) << "\n";
    return 0;
  }
  std::cout << std::left << std::setw(16) << "case" << std::right << std::setw(14) << "steps/s" << std::setw(16)
            << "TFLOP/s per GPU" << "\n";
  for (const auto& row : rows) {
    std::cout << std::left << std::setw(16) << row["case"].get<std::string>() << std::right << std::setw(14)
              << std::setprecision(4) << row["steps_per_s"].get<double>() << std::setw(16);
    if (row.contains("flops_per_gpu"))
      std::cout << std::fixed << std::setprecision(1) << row["flops_per_gpu"].get<double>() / 1e12
                << std::defaultfloat;
    else
      std::cout << "-";
    std::cout << "\n";
  }
  return 0;
}

}  // namespace tessel::cli
