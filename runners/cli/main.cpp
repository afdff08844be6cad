// `tessel`: parses the command line and hands over to libtessel.
// Exit codes: 0 success, 2 the user's error (bad config, trace, plugin,
// database or arguments), 1 a bug in tessel or a plugin, 130 interrupted.
#include <atomic>
#include <csignal>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "build_config.hpp"
#include "cluster_commands.hpp"
#include "commands.hpp"
#include "engine/errors.hpp"
#include "results/sqlite.hpp"
#include "simulation.hpp"

namespace {

std::atomic<bool> stop_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_interrupt(int) { stop_requested.store(true); }

}  // namespace

int main(int argc, char** argv) {
  tessel::sql::configure_own_process();
  CLI::App app{"tessel: compose, simulate and run schedulers for GPU clusters"};
  app.require_subcommand(1);
  app.set_version_flag("--version", tessel::kVersion);
  // Every command is declared, for `tessel --help` and the valid names, but
  // only the one run gets its options: declaring all of them cost every run
  // of tessel 1.2M instructions, a tenth of `tessel validate`'s. The
  // top-level options take no value, so the command is the first word that
  // is not an option.
  std::string_view invoked;
  for (int i = 1; i < argc && invoked.empty(); ++i)
    if (argv[i][0] != '-') invoked = argv[i];
  auto declaring = [invoked](const CLI::App* command) { return command->get_name() == invoked; };

  tessel::cli::RunOptions run;
  auto* run_cmd = app.add_subcommand("run", "Simulate an experiment, store its results and print a report");
  if (declaring(run_cmd)) {
    run_cmd->add_option("config", run.config, "experiment TOML file")->required();
    run_cmd->add_option("--db", run.database, "results database (default: [output] database)");
    run_cmd->add_option("--set", run.overrides, "override a config key, e.g. --set workload.seed=7")
        ->allow_extra_args(false);
    run_cmd->add_option("-j,--jobs", run.parallel, "simulations at once for a [sweep] (default: one per core)");
    run_cmd->add_flag("--resume", run.resume, "skip sweep points that already have a complete run in the database");
    run_cmd->add_flag("-q,--quiet", run.quiet, "print nothing on success");
    auto* run_point = run_cmd->add_option("--point", run.point, "run point K of the [sweep] alone (see --list-points)")
                         ->check(CLI::NonNegativeNumber);
    run_cmd->add_flag("--list-points", run.list_points, "print the [sweep]'s points, numbered as --point takes them")
        ->excludes(run_point);
    auto* run_slurm = run_cmd->add_flag("--slurm", run.slurm, "submit the sweep to Slurm as a job array, one point per task")
        ->excludes(run_point)
        ->excludes("--list-points")
        ->excludes("--jobs");
    run_cmd->add_option("--slurm-opt", run.slurm_options, "sbatch options for the array and merge jobs, e.g. \"--partition=cpu --time=1:00:00\"")
        ->allow_extra_args(false)
        ->needs(run_slurm);
    run_cmd->add_option("--max-parallel", run.max_parallel, "with --slurm: tasks running at once")
        ->check(CLI::PositiveNumber)
        ->needs(run_slurm);
    run_cmd->add_flag("--wait", run.wait, "with --slurm: wait for the sweep, showing its progress, then report")
        ->needs(run_slurm);
  }

  std::string merge_output;
  std::vector<std::string> merge_shards;
  auto* merge_cmd = app.add_subcommand("merge", "Copy the runs of results databases (a Slurm sweep's shards) into one");
  if (declaring(merge_cmd)) {
    merge_cmd->add_option("output", merge_output, "results database to merge into (created if missing)")->required();
    merge_cmd->add_option("shards", merge_shards, "results databases to copy the runs of")->required();
  }

  std::string validate_config;
  std::vector<std::string> validate_overrides;
  auto* validate_cmd = app.add_subcommand("validate", "Check an experiment: config, plugins, arguments and workload");
  if (declaring(validate_cmd)) {
    validate_cmd->add_option("config", validate_config, "experiment TOML file")->required();
    validate_cmd->add_option("--set", validate_overrides, "override a config key")->allow_extra_args(false);
  }

  std::string price_file, price_format = "table";
  auto* price_cmd =
      app.add_subcommand("price", "Price each [[case]] of a file with its throughput model, without simulating");
  if (declaring(price_cmd)) {
    price_cmd->add_option("file", price_file, "TOML file of [[case]] tables")->required();
    price_cmd->add_option("--format", price_format, "table or json")->check(CLI::IsMember({"table", "json"}));
  }

  tessel::cli::PluginsOptions plugins;
  auto* plugins_cmd = app.add_subcommand("plugins", "List the plugins found, with their kind, version and description");
  if (declaring(plugins_cmd)) {
    plugins_cmd->add_option("--kind", plugins.kind, "only this stage")
        ->check(CLI::IsMember({"admission", "allocation", "placement", "elasticity"}));
    plugins_cmd->add_option("--path", plugins.directories, "also search this directory")->allow_extra_args(false);
    plugins_cmd->add_flag("-v,--verbose", plugins.verbose, "show files, arguments and the search path");
    plugins_cmd->add_option("--python", plugins.python_files,
                            "also list the Python policy classes this file defines, with their arguments")
        ->allow_extra_args(false);
  }

  tessel::cli::ReportOptions report;
  auto* report_cmd = app.add_subcommand("report", "Summarise the runs in a results database");
  if (declaring(report_cmd)) {
    report_cmd->add_option("database", report.database, "results database")->required();
    report_cmd->add_option("--format", report.format, "table, csv or json")
        ->check(CLI::IsMember({"table", "csv", "json"}));
    report_cmd->add_option("--run", report.runs, "only these run ids")->allow_extra_args(false);
    CLI::Option* report_by =
        report_cmd->add_option("--by", report.by, "group a sweep by this axis, averaging over seeds");
    report_cmd->add_option("--group", report.group, "split each run's jobs: vc, one row per virtual cluster")
        ->check(CLI::IsMember({"vc"}));
    report_cmd->add_option("--over", report.over, "with --by: also average over this axis, as over seeds")
        ->allow_extra_args(false)
        ->needs(report_by);
  }

  std::string compare_db;
  std::int64_t compare_a = 0, compare_b = 0;
  auto* compare_cmd = app.add_subcommand("compare", "Two runs side by side, with ratios");
  if (declaring(compare_cmd)) {
    compare_cmd->add_option("database", compare_db, "results database")->required();
    compare_cmd->add_option("run_a", compare_a, "run id A")->required();
    compare_cmd->add_option("run_b", compare_b, "run id B")->required();
  }

  std::string explain_db;
  std::int64_t explain_job = 0;
  std::optional<std::int64_t> explain_run;
  std::optional<double> explain_from, explain_to;
  std::string explain_stage;
  auto* explain_cmd = app.add_subcommand("explain", "Why did a job wait? Its recorded decisions, in time order");
  if (declaring(explain_cmd)) {
    explain_cmd->add_option("database", explain_db, "results database")->required();
    explain_cmd->add_option("job", explain_job, "job id")->required()->check(CLI::NonNegativeNumber);
    explain_cmd->add_option("--run", explain_run, "run id (default: the last run)");
    explain_cmd->add_option("--from", explain_from, "only decisions at or after this time (seconds into the run)");
    explain_cmd->add_option("--to", explain_to, "only decisions at or before this time (seconds into the run)");
    explain_cmd->add_option("--stage", explain_stage, "only this stage's decisions")
        ->check(CLI::IsMember({"admission", "allocation", "placement", "elasticity"}));
  }

  tessel::cli::PlotOptions plot;
  auto* plot_cmd = app.add_subcommand("plot", "Draw figures with gnuplot (SVG or PNG)");
  if (declaring(plot_cmd)) {
    plot_cmd->add_option("database", plot.database, "results database")->required();
    plot_cmd->add_option("--kind", plot.kind, "jct-cdf, metric or occupancy")
        ->check(CLI::IsMember({"jct-cdf", "metric", "occupancy"}));
    plot_cmd->add_option("--run", plot.runs, "only these run ids")->allow_extra_args(false);
    plot_cmd->add_option("--metric", plot.metric, "for --kind metric: a report column, e.g. avg_jct_s");
    CLI::Option* plot_by = plot_cmd->add_option("--by", plot.by, "for --kind metric: the sweep axis on x");
    plot_cmd->add_option("--over", plot.over, "for --kind metric: also average over this axis, as over seeds")
        ->allow_extra_args(false)
        ->needs(plot_by);
    plot_cmd->add_option("-o,--output", plot.output, "output file, .svg or .png (default: <db>-<kind>.svg)");
  }

  // Real nodes. The scheduler address and the secret may come from the
  // environment, so that job scripts and shells need not repeat them.
  // How agents and clients reach the daemon: TLS with the secret's key, or
  // X.509 with these three, or plaintext with --insecure (tls.hpp).
  auto tls_options = [](CLI::App* command, tessel::cli::TlsFlags& tls) {
    command->add_option("--tls-cert", tls.cert, "X.509: this side's certificate (PEM)")->envname("TESSEL_TLS_CERT");
    command->add_option("--tls-key", tls.key, "X.509: its private key (PEM)")->envname("TESSEL_TLS_KEY");
    command->add_option("--tls-ca", tls.ca, "X.509: the CA that signed the daemon's certificate (PEM)")
        ->envname("TESSEL_TLS_CA");
    command->add_flag("--insecure", tls.insecure, "plaintext, for a daemon with [serve] insecure = true");
  };
  auto scheduler_options = [&tls_options](CLI::App* command, tessel::cli::ClientOptions& client) {
    command->add_option("--scheduler", client.scheduler, "the daemon, HOST:PORT")
        ->envname("TESSEL_SCHEDULER")
        ->default_val("127.0.0.1:7461");
    command->add_option("--secret-file", client.secret_file, "the shared secret (mode 600)")
        ->envname("TESSEL_SECRET_FILE");
    tls_options(command, client.tls);
  };

  tessel::cli::ServeOptions serve;
  auto* serve_cmd = app.add_subcommand("serve", "Run the scheduler daemon for real nodes");
  if (declaring(serve_cmd)) {
    serve_cmd->add_option("config", serve.config, "experiment TOML file ([scheduler], [serve], [output])")->required();
    serve_cmd->add_option("--listen", serve.listen, "HOST:PORT (default: [serve] listen); port 0 picks one");
    serve_cmd->add_option("--secret-file", serve.secret_file, "the shared secret (default: [serve] secret_file)")
        ->envname("TESSEL_SECRET_FILE");
    serve_cmd->add_option("--db", serve.database, "results database (default: [output] database)");
    serve_cmd->add_flag("--new-run", serve.new_run, "begin a new run instead of resuming an unfinished one");
    serve_cmd->add_option("--set", serve.overrides, "override a config key")->allow_extra_args(false);
  }

  tessel::cli::AgentCommandOptions agent;
  auto* agent_cmd = app.add_subcommand("agent", "Run a node agent: register this node's GPUs and run jobs");
  if (declaring(agent_cmd)) {
    agent_cmd->add_option("--scheduler", agent.scheduler, "the daemon, HOST:PORT")
        ->envname("TESSEL_SCHEDULER")
        ->required();
    agent_cmd->add_option("--secret-file", agent.secret_file, "the shared secret (mode 600)")
        ->envname("TESSEL_SECRET_FILE");
    agent_cmd->add_option("--name", agent.name, "this node's name (default: the host name)");
    agent_cmd->add_option("--fake-gpus", agent.fake_gpus, "register N fake GPUs instead of asking nvidia-smi")
        ->check(CLI::Range(0, 1024));
    agent_cmd->add_option("--gpu-type", agent.gpu_type, "the fake GPUs' type")->capture_default_str();
    agent_cmd->add_option("--log-dir", agent.log_dir, "where job logs go")->capture_default_str();
    agent_cmd->add_option("--address", agent.address,
                          "MASTER_ADDR for jobs led from here (default: this end of the scheduler connection)");
    tls_options(agent_cmd, agent.tls);
  }

  tessel::cli::ClientOptions client;
  tessel::cli::SubmitOptions submit;
  // `submit JOB.toml`, `submit [flags] -- COMMAND...`, or both: a first
  // word ending in .toml is the job file, the rest is the command.
  std::vector<std::string> submit_words;
  auto* submit_cmd = app.add_subcommand("submit", "Submit a job to the daemon; prints its id");
  if (declaring(submit_cmd)) {
    submit_cmd->add_option("job", submit_words, "JOB.toml, and/or the command after --");
    scheduler_options(submit_cmd, client);
    auto as_override = [&submit](const char* key, bool quote) {
      return [&submit, key, quote](const std::string& value) {
        submit.overrides.push_back(std::string(key) + "=" + (quote ? nlohmann::json(value).dump() : value));
      };
    };
    submit_cmd->add_option_function<std::string>("--name", as_override("name", true), "job name");
    submit_cmd->add_option_function<std::string>("--gpus", as_override("gpus", false), "GPUs");
    submit_cmd->add_option_function<std::string>("--min-gpus", as_override("min_gpus", false), "elastic: fewest GPUs");
    submit_cmd->add_option_function<std::string>("--max-gpus", as_override("max_gpus", false), "elastic: most GPUs");
    submit_cmd->add_option_function<std::string>("--iterations", as_override("iterations", false),
                                                 "its length; without it the job ends by exit alone");
    submit_cmd->add_option_function<std::string>("--processes", as_override("processes", true), "per_gpu or per_node");
    submit_cmd->add_option_function<std::string>("--tenant", as_override("tenant", true), "user or team (default: $USER)");
    submit_cmd->add_option_function<std::string>("--vc", as_override("vc", true), "virtual cluster");
    submit_cmd->add_option_function<std::string>("--workdir", as_override("workdir", true), "working directory");
    submit_cmd->add_option_function<std::string>("--grace-seconds", as_override("grace_seconds", false),
                                                 "SIGTERM to SIGKILL");
    submit_cmd->add_option_function<std::vector<std::string>>(
        "--env",
        [&submit](const std::vector<std::string>& entries) {
          for (const std::string& entry : entries) {
            const auto eq = entry.find('=');
            if (eq == std::string::npos || eq == 0) throw CLI::ValidationError("--env", "expected NAME=VALUE, got '" + entry + "'");
            submit.overrides.push_back("env." + entry.substr(0, eq) + "=" + nlohmann::json(entry.substr(eq + 1)).dump());
          }
        },
        "add NAME=VALUE to the job's environment")
        ->allow_extra_args(false);
    submit_cmd->add_option("--set", submit.overrides, "set any job-file key, e.g. --set priority=2")
        ->allow_extra_args(false);
    submit_cmd->add_option("--file", submit.batch_file,
                           "many jobs: [[job]] tables (.toml) or one job object per line (.jsonl, .json); all or none");
  }

  std::string jobs_format = "table";
  auto* jobs_cmd = app.add_subcommand("jobs", "List the daemon's jobs");
  if (declaring(jobs_cmd)) {
    scheduler_options(jobs_cmd, client);
    jobs_cmd->add_option("--format", jobs_format, "table or json")->check(CLI::IsMember({"table", "json"}));
  }

  std::uint32_t cancel_id = 0;
  auto* cancel_cmd = app.add_subcommand("cancel", "Cancel a job");
  if (declaring(cancel_cmd)) {
    cancel_cmd->add_option("id", cancel_id, "job id")->required();
    scheduler_options(cancel_cmd, client);
  }

  auto* status_cmd = app.add_subcommand("status", "Show the daemon's nodes and round times");
  if (declaring(status_cmd)) {
    scheduler_options(status_cmd, client);
  }

  tessel::cli::LogsOptions logs;
  auto* logs_cmd = app.add_subcommand("logs", "Show the end of a job rank's log, fetched from the node that ran it");
  if (declaring(logs_cmd)) {
    logs_cmd->add_option("id", logs.job, "job id")->required();
    logs_cmd->add_option("--rank", logs.rank, "which rank")->capture_default_str()->check(CLI::NonNegativeNumber);
    logs_cmd->add_option("--launch", logs.launch, "which launch of the job (default: its latest)");
    logs_cmd->add_option("--bytes", logs.bytes, "at most this much of the log's end (at most 2 MiB)")
        ->capture_default_str();
    scheduler_options(logs_cmd, client);
  }

  std::int64_t progress_iteration = 0, progress_total = 0;
  auto* progress_cmd = app.add_subcommand("progress", "From a job: report progress to its agent (TESSEL_PROGRESS)");
  if (declaring(progress_cmd)) {
    progress_cmd->add_option("iteration", progress_iteration, "iterations done")->required();
    progress_cmd->add_option("total", progress_total, "iterations in all");
  }

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
    if (*merge_cmd) return tessel::cli::merge(merge_output, merge_shards);
    if (*validate_cmd) return tessel::cli::validate(validate_config, validate_overrides, stop_requested);
    if (*plugins_cmd) return tessel::cli::plugins(plugins, stop_requested);
    if (*price_cmd) return tessel::cli::price(price_file, price_format);
    if (*report_cmd) return tessel::cli::report(report);
    if (*compare_cmd) return tessel::cli::compare(compare_db, compare_a, compare_b);
    if (*explain_cmd) return tessel::cli::explain(explain_db, explain_job, explain_run, explain_from, explain_to, explain_stage);
    if (*plot_cmd) return tessel::cli::plot(plot);
    if (*serve_cmd) return tessel::cli::serve(serve, stop_requested);
    if (*agent_cmd) return tessel::cli::agent(agent);
    if (*submit_cmd) {
      if (!submit_words.empty() && submit_words.front().ends_with(".toml")) {
        submit.job_file = submit_words.front();
        submit_words.erase(submit_words.begin());
      }
      submit.command = submit_words;
      return tessel::cli::submit(client, submit);
    }
    if (*jobs_cmd) return tessel::cli::jobs(client, jobs_format);
    if (*cancel_cmd) return tessel::cli::cancel(client, cancel_id);
    if (*status_cmd) return tessel::cli::status(client);
    if (*logs_cmd) return tessel::cli::logs(client, logs);
    if (*progress_cmd) return tessel::cli::progress(progress_iteration, progress_total);
  } catch (const tessel::ConfigError& e) {
    // Located problems read like a compiler's; the rest like every other error.
    for (const auto& d : e.diagnostics()) std::cerr << (d.where.empty() ? "tessel: " : "") << d.str() << "\n";
    return 2;
  } catch (const tessel::UserError& e) {
    std::cerr << tessel::cli::message_prefix() << e.what() << "\n";
    return 2;
  } catch (const tessel::Interrupted& e) {
    std::cerr << tessel::cli::message_prefix() << e.what() << "\n";
    return 130;
  } catch (const tessel::PluginContractError& e) {
    std::cerr << tessel::cli::message_prefix() << e.what() << "\n";  // the plugin's bug, not tessel's
    return 1;
  } catch (const std::exception& e) {
    std::cerr << tessel::cli::message_prefix() << "internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
