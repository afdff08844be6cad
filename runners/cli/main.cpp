// `tessel`: parses the command line and hands over to libtessel.
// Exit codes: 0 success, 2 the user's error (bad config, trace, plugin,
// database or arguments), 1 a bug in tessel or a plugin, 130 interrupted.
#include <atomic>
#include <csignal>
#include <iostream>

#include <CLI/CLI.hpp>

#include "build_config.hpp"
#include "commands.hpp"
#include "engine/errors.hpp"
#include "simulation.hpp"

namespace {

std::atomic<bool> stop_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_interrupt(int) { stop_requested.store(true); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tessel: compose, simulate and run schedulers for GPU clusters"};
  app.require_subcommand(1);
  app.set_version_flag("--version", tessel::kVersion);

  tessel::cli::RunOptions run;
  auto* run_cmd = app.add_subcommand("run", "Simulate an experiment, store its results and print a report");
  run_cmd->add_option("config", run.config, "experiment TOML file")->required();
  run_cmd->add_option("--db", run.database, "results database (default: [output] database)");
  run_cmd->add_option("--set", run.overrides, "override a config key, e.g. --set workload.seed=7")
      ->allow_extra_args(false);
  run_cmd->add_option("-j,--jobs", run.parallel, "simulations at once for a [sweep] (default: one per core)");
  run_cmd->add_flag("--resume", run.resume, "skip sweep points that already have a complete run in the database");
  run_cmd->add_flag("-q,--quiet", run.quiet, "print nothing on success");

  std::string validate_config;
  std::vector<std::string> validate_overrides;
  auto* validate_cmd = app.add_subcommand("validate", "Check an experiment: config, plugins, arguments and workload");
  validate_cmd->add_option("config", validate_config, "experiment TOML file")->required();
  validate_cmd->add_option("--set", validate_overrides, "override a config key")->allow_extra_args(false);

  tessel::cli::PluginsOptions plugins;
  auto* plugins_cmd = app.add_subcommand("plugins", "List the plugins found, with their kind, version and description");
  plugins_cmd->add_option("--kind", plugins.kind, "only this stage")
      ->check(CLI::IsMember({"admission", "allocation", "placement", "elasticity"}));
  plugins_cmd->add_option("--path", plugins.directories, "also search this directory")->allow_extra_args(false);
  plugins_cmd->add_flag("-v,--verbose", plugins.verbose, "show files, arguments and the search path");

  tessel::cli::ReportOptions report;
  auto* report_cmd = app.add_subcommand("report", "Summarise the runs in a results database");
  report_cmd->add_option("database", report.database, "results database")->required();
  report_cmd->add_option("--format", report.format, "table, csv or json")
      ->check(CLI::IsMember({"table", "csv", "json"}));
  report_cmd->add_option("--run", report.runs, "only these run ids")->allow_extra_args(false);
  report_cmd->add_option("--by", report.by, "group a sweep by this axis, averaging over seeds");
  report_cmd->add_option("--over", report.over, "with --by: also average over this axis, as over seeds")
      ->allow_extra_args(false);

  std::string compare_db;
  std::int64_t compare_a = 0, compare_b = 0;
  auto* compare_cmd = app.add_subcommand("compare", "Two runs side by side, with ratios");
  compare_cmd->add_option("database", compare_db, "results database")->required();
  compare_cmd->add_option("run_a", compare_a, "run id A")->required();
  compare_cmd->add_option("run_b", compare_b, "run id B")->required();

  std::string explain_db;
  std::int64_t explain_job = 0;
  std::optional<std::int64_t> explain_run;
  auto* explain_cmd = app.add_subcommand("explain", "Why did a job wait? Its recorded decisions, in time order");
  explain_cmd->add_option("database", explain_db, "results database")->required();
  explain_cmd->add_option("job", explain_job, "job id")->required();
  explain_cmd->add_option("--run", explain_run, "run id (default: the last run)");

  tessel::cli::PlotOptions plot;
  auto* plot_cmd = app.add_subcommand("plot", "Draw figures with gnuplot (SVG or PNG)");
  plot_cmd->add_option("database", plot.database, "results database")->required();
  plot_cmd->add_option("--kind", plot.kind, "jct-cdf, metric or occupancy")
      ->check(CLI::IsMember({"jct-cdf", "metric", "occupancy"}));
  plot_cmd->add_option("--run", plot.runs, "only these run ids")->allow_extra_args(false);
  plot_cmd->add_option("--metric", plot.metric, "for --kind metric: a report column, e.g. avg_jct_s");
  plot_cmd->add_option("--by", plot.by, "for --kind metric: the sweep axis on x");
  plot_cmd->add_option("--over", plot.over, "for --kind metric: also average over this axis, as over seeds")
      ->allow_extra_args(false);
  plot_cmd->add_option("-o,--output", plot.output, "output file, .svg or .png (default: <db>-<kind>.svg)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help, or the parse error
    return code == 0 ? 0 : 2;
  }

  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  try {
    if (*run_cmd) return tessel::cli::run(run, stop_requested);
    if (*validate_cmd) return tessel::cli::validate(validate_config, validate_overrides);
    if (*plugins_cmd) return tessel::cli::plugins(plugins);
    if (*report_cmd) return tessel::cli::report(report);
    if (*compare_cmd) return tessel::cli::compare(compare_db, compare_a, compare_b);
    if (*explain_cmd) return tessel::cli::explain(explain_db, explain_job, explain_run);
    if (*plot_cmd) return tessel::cli::plot(plot);
  } catch (const tessel::ConfigError& e) {
    for (const auto& d : e.diagnostics()) std::cerr << d.str() << "\n";
    return 2;
  } catch (const tessel::UserError& e) {
    std::cerr << "tessel: " << e.what() << "\n";
    return 2;
  } catch (const tessel::Interrupted&) {
    std::cerr << "tessel: interrupted; the run is marked 'interrupted'\n";
    return 130;
  } catch (const std::exception& e) {
    std::cerr << "tessel: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
