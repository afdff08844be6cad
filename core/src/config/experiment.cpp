#include "config/experiment.hpp"

#include "common/simulated_clock.hpp"

namespace tessel {

namespace {

StageConfig read_stage(TableReader& scheduler, const TomlDocument& document, PluginKind kind,
                       const char* default_plugin) {
  const std::string key(to_string(kind));
  StageConfig stage;
  stage.kind = kind;
  const toml::table* table = scheduler.table(key);
  if (table == nullptr) {
    if (default_plugin == nullptr && !scheduler.present(key))
      scheduler.error(key, "[scheduler] needs '" + key + " = { plugin = \"...\" }'");
    stage.plugin = default_plugin ? default_plugin : "";
    stage.where = scheduler.where();
    return stage;
  }
  TableReader reader = scheduler.nested(table, "scheduler." + key);
  stage.plugin = reader.string("plugin", std::nullopt).value_or("");
  stage.where = reader.where("plugin");
  if (reader.present("path")) {
    std::filesystem::path library(reader.string("path", std::nullopt).value_or(""));
    if (library.is_relative() && !reader.where("path").starts_with("--set"))
      library = document.base_directory() / library;
    stage.library = library.lexically_normal().string();
  }
  for (auto&& [name, value] : *table) {
    if (name == "plugin" || name == "path") continue;
    stage.args.insert_or_assign(name.str(), value);
    stage.arg_where[std::string(name.str())] = document.where(value);
  }
  // Arguments are the plugin's to check; the reader only checks its own keys.
  return stage;
}

SchedulerConfig read_scheduler(TableReader reader, const TomlDocument& document) {
  SchedulerConfig config;
  config.settings.round_seconds =
      reader.number("round_seconds", 300).value_or(300);
  if (config.settings.round_seconds <= 0) {
    reader.error("round_seconds", "'round_seconds' in [scheduler] must be > 0");
    config.settings.round_seconds = 300;
  } else if (config.settings.round_seconds > kLastSimulatedSecond) {
    reader.error("round_seconds", std::string("'round_seconds' in [scheduler] must be at most ") +
                                      kLastSimulatedSecondText + ", where a simulation's clock ends");
    config.settings.round_seconds = 300;
  }
  const auto service = reader.choice("attained_service", {"gpu_seconds", "seconds"}, "gpu_seconds");
  config.settings.service = service == "seconds" ? ServiceUnit::seconds : ServiceUnit::gpu_seconds;
  config.rules.stop_left_out = reader.choice("left_out", {"keep", "stop"}, "keep") == "stop";
  config.rules.place_every_round = reader.choice("placement_each_round", {"sticky", "every_round"}, "sticky") == "every_round";
  if (config.rules.place_every_round && !config.rules.stop_left_out)
    reader.error("placement_each_round",
                 "'placement_each_round = \"every_round\"' in [scheduler] needs 'left_out = \"stop\"': a job the "
                 "plan leaves out holds nothing once every job gives up its place");
  config.plugin_path = reader.strings("plugin_path", std::vector<std::string>{}).value_or(std::vector<std::string>{});
  for (auto& dir : config.plugin_path) {
    std::filesystem::path p(dir);
    if (p.is_relative()) dir = (document.base_directory() / p).lexically_normal().string();
  }
  config.stages[0] = read_stage(reader, document, PluginKind::admission, "accept_all");
  config.stages[1] = read_stage(reader, document, PluginKind::allocation, nullptr);
  config.stages[2] = read_stage(reader, document, PluginKind::placement, nullptr);
  config.stages[3] = read_stage(reader, document, PluginKind::elasticity, "none");
  reader.finish();
  return config;
}

SimulationConfig read_simulation(TableReader reader) {
  SimulationConfig config;
  const std::string completion = reader.choice("completion", {"exact", "round", "exact-held"}, "exact").value_or("exact");
  config.completion_at_round_end = completion != "exact";
  config.finish_at_exact_time = completion != "round";
  config.whole_iterations =
      reader.choice("progress", {"continuous", "whole_iterations"}, "continuous") == "whole_iterations";
  config.progress_where = reader.where("progress");
  // Whole iterations are counted per round; a job that may end mid-round
  // would end at a time no whole number of iterations gives.
  if (config.whole_iterations && completion != "round")
    reader.error("progress", "'progress = \"whole_iterations\"' in [simulation] needs 'completion = \"round\"'");
  config.rate_changes_on_whole_seconds =
      reader.choice("rate_change_times", {"exact", "whole_seconds"}, "exact") == "whole_seconds";
  config.event_rounds = reader.choice("rounds", {"clock", "events"}, "clock") == "events";
  config.rounds_where = reader.where("rounds");
  // Rounds at events have no clock whose ends completions could wait for.
  if (config.event_rounds && config.completion_at_round_end)
    reader.error("completion", "'completion = \"" + completion + "\"' needs rounds on a clock; with 'rounds = \"events\"' use "
                               "'completion = \"exact\"'");
  config.preemption_overhead_seconds =
      reader.number("preemption_overhead_seconds", 0, 0).value_or(0);
  config.start_overhead_seconds = reader.number("start_overhead_seconds", 0, 0).value_or(0);
  reader.finish();
  return config;
}

FailureConfig read_failures(TableReader reader) {
  FailureConfig config;
  config.node_mtbf_seconds = 3600 * reader.number("node_mtbf_hours", 0, 0).value_or(0);
  config.node_repair_seconds = 3600 * reader.number("node_repair_hours", 2, 0).value_or(2);
  config.checkpoint_interval_seconds = reader.number("checkpoint_interval_seconds", 0, 0).value_or(0);
  config.job_failure_probability = reader.number("job_failure_probability", 0, 0, 1).value_or(0);
  config.max_retries = static_cast<int>(reader.integer("max_retries", 4, 0, 1000).value_or(4));
  reader.finish();
  return config;
}

OutputConfig read_output(TableReader reader) {
  OutputConfig config;
  config.database = reader.string("database", config.database).value_or(config.database);
  config.label = reader.string("label", "").value_or("");
  config.decisions = reader.boolean("decisions", false).value_or(false);
  reader.finish();
  return config;
}

ServeConfig read_serve(TableReader reader, std::shared_ptr<const TomlDocument> document) {
  ServeConfig config;
  config.listen = reader.string("listen", config.listen).value_or(config.listen);
  if (reader.present("secret_file"))
    config.secret_file = reader.input_path("secret_file", std::nullopt).value_or("");
  config.insecure = reader.boolean("insecure", false).value_or(false);
  const std::pair<const char*, std::string*> tls_files[] = {
      {"tls_cert", &config.tls_cert}, {"tls_key", &config.tls_key}, {"tls_ca", &config.tls_ca}};
  int tls_given = 0;
  for (const auto& [key, path] : tls_files)
    if (reader.present(key)) {
      *path = reader.input_path(key, std::nullopt).value_or("");
      ++tls_given;
    }
  // Refused rather than resolved: half of an X.509 set-up, or TLS and plaintext at once.
  if (tls_given > 0 && config.insecure)
    reader.error("insecure", "'insecure = true' in [serve] contradicts tls_cert, tls_key and tls_ca");
  else if (tls_given > 0)
    for (const auto& [key, path] : tls_files)
      if (!reader.present(key))
        reader.error(key, "'" + std::string(key) + "' in [serve] is missing: tls_cert, tls_key and tls_ca go together");
  config.heartbeat_seconds = reader.number("heartbeat_seconds", 1, 0.01).value_or(1);
  config.node_timeout_seconds = reader.number("node_timeout_seconds", 10, 0.1).value_or(10);
  if (config.node_timeout_seconds < 2 * config.heartbeat_seconds)
    reader.error("node_timeout_seconds", "'node_timeout_seconds' in [serve] must be at least two heartbeats (" +
                                             std::to_string(2 * config.heartbeat_seconds) + " s)");
  config.grace_seconds = reader.number("grace_seconds", 10, 0).value_or(10);
  config.frame_timeout_seconds = reader.number("frame_timeout_seconds", 10, 0.01).value_or(10);
  // At least one largest frame (16 MiB, kMaxFrameBytes in runners/cluster/frame.hpp),
  // so that any frame the protocol allows can arrive when the daemon holds nothing else.
  config.max_buffered_mib = static_cast<int>(reader.integer("max_buffered_mib", 256, 16, 1 << 20).value_or(256));
  config.max_retries = static_cast<int>(reader.integer("max_retries", 3, 0, 1000).value_or(3));
  config.retry_seconds = reader.number("retry_seconds", 1, 0, 86400).value_or(1);
  config.retry_max_seconds = reader.number("retry_max_seconds", 60, 0, 86400).value_or(60);
  if (config.retry_max_seconds < config.retry_seconds)
    reader.error("retry_max_seconds", "'retry_max_seconds' in [serve] must be at least 'retry_seconds' (" +
                                          std::to_string(config.retry_seconds) + " s)");
  const auto ports = reader.numbers("master_ports", std::vector<double>{29500, 29999}, 1, 65535);
  if (ports && (ports->size() != 2 || (*ports)[0] > (*ports)[1]))
    reader.error("master_ports", "'master_ports' in [serve] must be [first, last] with first <= last");
  else if (ports)
    config.master_port_first = static_cast<int>((*ports)[0]), config.master_port_last = static_cast<int>((*ports)[1]);
  config.executor = reader.choice("executor", {"agents", "slurm"}, config.executor).value_or(config.executor);
  config.slurm_partition = reader.string("slurm_partition", "").value_or("");
  config.slurm_log_dir = reader.string("slurm_log_dir", "").value_or("");
  // Slurm settings beside agents contradict each other: refused, not ignored.
  if (config.executor != "slurm")
    for (const char* key : {"slurm_partition", "slurm_log_dir"})
      if (reader.present(key))
        reader.error(key, "'" + std::string(key) + "' in [serve] applies to executor = \"slurm\" only; this one's is \"" +
                              config.executor + "\"");
  config.model = read_model_settings(reader, std::move(document));
  reader.finish();
  return config;
}

}  // namespace

ExperimentConfig read_experiment(std::shared_ptr<const TomlDocument> document, Diagnostics& diagnostics) {
  ExperimentConfig config;
  config.document = document;
  TableReader root(*document, diagnostics, &document->root(), "");
  {
    TableReader cluster = root.nested(root.table("cluster"), "cluster");
    config.cluster = read_cluster_config(cluster);
  }
  {
    TableReader workload = root.nested(root.table("workload"), "workload");
    config.workload = read_workload_settings(workload, document);  // finished by check_workload
  }
  config.scheduler = read_scheduler(root.nested(root.table("scheduler"), "scheduler"), *document);
  config.simulation = read_simulation(root.nested(root.table("simulation"), "simulation"));
  config.failures = read_failures(root.nested(root.table("failures"), "failures"));
  config.output = read_output(root.nested(root.table("output"), "output"));
  config.serve = read_serve(root.nested(root.table("serve"), "serve"), document);
  root.node("sweep");  // expanded before reading (config/sweep.hpp)
  root.finish();
  return config;
}

ExperimentConfig read_experiment(std::shared_ptr<const TomlDocument> document) {
  Diagnostics diagnostics;
  ExperimentConfig config = read_experiment(std::move(document), diagnostics);
  diagnostics.raise_if_any();
  return config;
}

ExperimentConfig load_served_experiment(const std::filesystem::path& path,
                                        const std::vector<std::string>& overrides) {
  Diagnostics diagnostics;
  ExperimentConfig config;
  config.document = std::make_shared<const TomlDocument>(TomlDocument::load(path, overrides));
  const TomlDocument& document = *config.document;
  TableReader root(document, diagnostics, &document.root(), "");
  for (const char* simulated_only : {"cluster", "workload", "simulation", "failures", "sweep"})
    (void)root.node(simulated_only);  // known, and left to simulations
  TableReader scheduler = root.nested(root.table("scheduler"), "scheduler");
  config.scheduler = read_scheduler(scheduler, document);
  // Rules of the simulated round (Synergy's leases); the daemon keeps
  // running jobs where they are.
  if (config.scheduler.rules.stop_left_out)
    scheduler.error("left_out", "'left_out = \"stop\"' in [scheduler] applies to simulations; tessel serve keeps "
                                "running jobs until a ranked job needs their GPUs");
  if (config.scheduler.rules.place_every_round)
    scheduler.error("placement_each_round", "'placement_each_round = \"every_round\"' in [scheduler] applies to "
                                            "simulations; tessel serve keeps running jobs where they are");
  config.output = read_output(root.nested(root.table("output"), "output"));
  config.serve = read_serve(root.nested(root.table("serve"), "serve"), config.document);
  root.finish();
  diagnostics.raise_if_any();
  return config;
}

}  // namespace tessel
