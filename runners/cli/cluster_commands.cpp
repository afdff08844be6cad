#include "cluster_commands.hpp"

#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <iomanip>
#include <iostream>

#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>

#include "agent.hpp"
#include "client.hpp"
#include "config/experiment.hpp"
#include "daemon.hpp"
#include "engine/errors.hpp"
#include "job_request.hpp"
#include "log_line.hpp"
#include "plugins/hosted_code.hpp"
#include "protocol.hpp"
#include "models/models.hpp"
#include "results/store.hpp"
#include "tessel/progress.hpp"

// The library's side: the commands' bodies, reached through the table at the
// end; the executable's side, of the same names, is nodes_library.cpp.
namespace tessel::cli::nodes {

using namespace tessel::cluster;

namespace {

Secret secret_from(const std::string& file, const char* command) {
  if (file.empty())
    throw UserError(std::string(command) + " needs the shared secret: --secret-file FILE (or TESSEL_SECRET_FILE)");
  return Secret::from_file(file);
}

TlsSettings tls_settings(const TlsFlags& flags) {
  TlsSettings tls;
  tls.insecure = flags.insecure;
  tls.cert = flags.cert;
  tls.key = flags.key;
  tls.ca = flags.ca;
  tls.check();
  return tls;
}

// One connection for one request, as every client command makes.
SchedulerClient open_client(const ClientOptions& client, const char* command) {
  const TlsSettings tls = tls_settings(client.tls);
  Secret secret = secret_from(client.secret_file, command);
  if (tls.insecure) log_line("tessel " + std::string(command), "warning: --insecure: this request crosses the network in clear");
  return SchedulerClient(client.scheduler, std::move(secret), tls);
}

std::string fixed(double value, int decimals) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(decimals) << value;
  return text.str();
}

// Set by serve and agent once they log: their errors are log lines too.
const char* serving = nullptr;

}  // namespace

std::string message_prefix() {
  if (serving == nullptr) return "tessel: ";
  return iso8601_utc_now() + " " + serving + ": ";
}

int serve(const ServeOptions& options, const std::atomic<bool>& stop) {
  const ExperimentConfig config = load_served_experiment(options.config, options.overrides);
  build_throughput_model(config.serve.model);  // checked before the run is journaled; the daemon builds its own
  const std::string secret_file = options.secret_file.empty() ? config.serve.secret_file : options.secret_file;
  if (secret_file.empty())
    throw UserError("serve needs the shared secret: --secret-file FILE or [serve] secret_file");
  Secret secret = Secret::from_file(secret_file);
  std::string unread;
  for (const char* section : {"cluster", "workload", "simulation", "failures"})
    if (config.document->root().contains(section)) unread += (unread.empty() ? "[" : ", [") + std::string(section) + "]";
  if (!unread.empty())
    log_line("tessel serve", "note: leaving " + unread + " to simulations: nodes come from agents, jobs from `tessel submit`");
  PluginRegistry registry(config.scheduler.plugin_path);
  DaemonOptions daemon_options;
  daemon_options.database = options.database.empty() ? config.output.database : options.database;
  daemon_options.new_run = options.new_run;
  create_database_folder(daemon_options.database);

  asio::io_context io;
  serving = "tessel serve";
  // Ctrl-C (main's handler sets `stop`) stops the daemon between its
  // handlers, on this thread. A policy stuck in its own code never returns
  // to them, so the watch also interrupts the user's code here: from before
  // the daemon exists, since composing it imports the policies' modules.
  // Either way the daemon stops the same, and its run is 'interrupted'.
  SchedulerDaemon* daemon_made = nullptr;  // set before io.run(), where the posted stop runs
  auto stop_daemon = [&] {
    log_line("tessel serve", config.serve.executor == "slurm"
                                 ? "stopping; its Slurm jobs keep running, for the next `tessel serve` to adopt"
                                 : "stopping; jobs keep running until their agents' leases expire");
    daemon_made->stop();
  };
  HostedCodeWatch watch([&] { return stop.load(); },
                        [&] {
                          asio::post(io, [&] {
                            stop_daemon();
                            io.stop();
                          });
                        });
  const HostedCodeWatch::Watching watching = watch.watch_this_thread();
  SchedulerDaemon daemon(io, config, registry, std::move(secret), daemon_options);
  daemon_made = &daemon;
  const tcp::endpoint endpoint = daemon.listen(options.listen.empty() ? config.serve.listen : options.listen);
  // Machine-readable, so scripts and tests learn the port that 0 picked.
  std::cout << "listening on " << endpoint.address().to_string() << ":" << endpoint.port() << std::endl;
  log_line("tessel serve", "run " + std::to_string(daemon.run_id()) + (daemon.resumed() ? " (resumed)" : "") + " in " +
                               daemon_options.database);
  daemon.start();
  try {
    io.run();  // until the posted stop
  } catch (const Interrupted& e) {
    stop_daemon();  // the policy's code was interrupted, or raised KeyboardInterrupt itself
    throw e.marking(1);
  }
  if (stop.load()) throw Interrupted(Interrupted::kStopped, 1);
  return 0;
}

int agent(const AgentCommandOptions& options) {
  if (options.scheduler.empty()) throw UserError("agent needs --scheduler HOST:PORT");
  const TlsSettings tls = tls_settings(options.tls);
  Secret secret = secret_from(options.secret_file, "agent");
  AgentOptions agent_options;
  agent_options.scheduler = options.scheduler;
  (void)split_host_port(options.scheduler, "--scheduler");
  agent_options.name = options.name;
  if (agent_options.name.empty()) {
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    agent_options.name = host;
  }
  agent_options.log_dir = std::filesystem::absolute(options.log_dir);
  agent_options.address = options.address;
  agent_options.tls = tls;
  NodeInventory inventory = NodeInventory::detect(options.fake_gpus, options.gpu_type);

  asio::io_context io;
  serving = "tessel agent";
  NodeAgent node(io, agent_options, std::move(secret), std::move(inventory));
  node.start();
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](boost::system::error_code error, int) {
    if (!error) node.shut_down();
  });
  io.run();
  return node.exit_code();
}

namespace {

int submit_batch(const ClientOptions& client, const SubmitOptions& options) {
  // The file says everything about its jobs: a flag beside it would either
  // be ignored or change every job unseen.
  if (!options.job_file.empty() || !options.overrides.empty() || !options.command.empty())
    throw UserError("submit --file " + options.batch_file +
                    ": the jobs come from the file alone; leave out the job file, the command and the job flags");
  const std::vector<JobRequest> requests = read_job_batch(options.batch_file, std::filesystem::current_path());
  if (requests.size() > kMaxBatchJobs)
    throw UserError(options.batch_file + ": " + std::to_string(requests.size()) + " jobs, over the " +
                    std::to_string(kMaxBatchJobs) + " one submission may carry; split the file");
  json jobs = json::array();
  for (const JobRequest& request : requests) jobs.push_back(request.to_json());
  json request = message("submit_batch", {{"jobs", std::move(jobs)}});
  // All or none: the batch travels as one request, journalled in one transaction.
  if (const std::size_t bytes = request.dump().size(); bytes > kMaxFrameBytes)
    throw UserError(options.batch_file + ": its " + std::to_string(requests.size()) + " jobs make a " +
                    std::to_string(bytes >> 20) + " MiB request, over the " + std::to_string(kMaxFrameBytes >> 20) +
                    " MiB one request may carry; split the file");
  SchedulerClient connection = open_client(client, "submit");
  const Message reply = connection.request(request);
  for (const json& id : reply.array("jobs")) std::cout << "submitted job " << id.get<std::int64_t>() << "\n";
  std::cout.flush();
  return 0;
}

}  // namespace

int submit(const ClientOptions& client, const SubmitOptions& options) {
  if (!options.batch_file.empty()) return submit_batch(client, options);
  std::vector<std::string> overrides = options.overrides;
  if (!options.command.empty()) overrides.push_back("command=" + json(options.command).dump());
  std::optional<std::filesystem::path> file;
  if (!options.job_file.empty()) file = options.job_file;
  const JobRequest request = read_job_request(file, overrides, std::filesystem::current_path());
  SchedulerClient connection = open_client(client, "submit");
  const Message reply = connection.request(message("submit", {{"job", request.to_json()}}));
  std::cout << "submitted job " << reply.integer("job", 0) << std::endl;
  return 0;
}

int jobs(const ClientOptions& client, const std::string& format) {
  SchedulerClient connection = open_client(client, "jobs");
  const Message reply = connection.request(message("jobs"));
  const json& list = reply.array("jobs");
  if (reply.has("database_error"))
    std::cerr << "warning: the scheduler cannot write its database: " << reply.text("database_error") << "\n";
  if (format == "json") {
    std::cout << list.dump(2) << "\n";
    return 0;
  }
  // Start and end as ISO 8601 UTC times; the daemon keeps them relative to its run's time 0.
  const double epoch = reply.has("epoch") ? reply.number("epoch") : 0;
  auto wall_clock = [&](const json& job, const char* key) -> std::string {
    if (!job.contains(key)) return "-";
    return iso8601_utc(epoch + job.at(key).get<double>(), /*millis=*/false);
  };
  std::cout << std::left << std::setw(7) << "ID" << std::setw(16) << "NAME" << std::setw(10) << "TENANT"
            << std::setw(11) << "STATUS" << std::setw(6) << "GPUS" << std::setw(18) << "PROGRESS"
            << std::setw(12) << "PREEMPTIONS" << std::setw(9) << "ATTEMPTS" << std::setw(22) << "STARTED (UTC)"
            << std::setw(22) << "ENDED (UTC)" << "NODES\n";
  for (const json& job : list) {
    std::string progress = fixed(job.at("iteration").get<double>(), 0);
    if (job.contains("iterations")) progress += " of " + std::to_string(job.at("iterations").get<std::int64_t>());
    std::string nodes;
    for (const json& node : job.at("nodes")) nodes += (nodes.empty() ? "" : ",") + node.get<std::string>();
    std::string name = job.at("name").get<std::string>();
    if (name.size() > 15) name = name.substr(0, 14) + "~";
    std::cout << std::left << std::setw(7) << job.at("id").get<std::int64_t>() << std::setw(16)
              << (name.empty() ? "-" : name) << std::setw(10) << job.at("tenant").get<std::string>() << std::setw(11)
              << job.at("status").get<std::string>() << std::setw(6) << job.at("gpus").get<int>() << std::setw(18)
              << progress << std::setw(12) << job.at("preemptions").get<int>() << std::setw(9)
              << job.at("attempts").get<int>() << std::setw(22) << wall_clock(job, "started") << std::setw(22)
              << wall_clock(job, "finished") << (nodes.empty() ? "-" : nodes) << "\n";
    // Long: on a line of its own under the job's.
    if (job.contains("last_error")) std::cout << "       last error: " << job.at("last_error").get<std::string>() << "\n";
  }
  return 0;
}

int logs(const ClientOptions& client, const LogsOptions& options) {
  if (options.bytes < 1 || options.bytes > kMaxLogBytes)
    throw UserError("logs: --bytes must be 1 to " + std::to_string(kMaxLogBytes) + " (2 MiB), not " +
                    std::to_string(options.bytes));
  SchedulerClient connection = open_client(client, "logs");
  json request = {{"job", options.job}, {"rank", options.rank}, {"max_bytes", options.bytes}};
  if (options.launch != 0) request["launch"] = options.launch;
  const Message reply = connection.request(message("logs", std::move(request)));
  std::string text = reply.text("text");
  const std::int64_t size = reply.integer("size", 0), from = reply.integer("from", 0);
  const std::string where = reply.text("node") + ":" + reply.text("path");
  std::cerr << "tessel: job " << reply.integer("job", 0) << ", launch " << reply.integer("launch", 0) << ", rank "
            << reply.integer("rank", 0) << ": " << where << " (" << size << " bytes; every launch of the rank on that "
            << "node appends to it)\n";
  if (from > 0) {
    // Cut at a line's start, not in the middle of one.
    if (const auto newline = text.find('\n'); newline != std::string::npos) text.erase(0, newline + 1);
    std::cerr << "tessel: showing its last " << text.size() << " bytes; --bytes N shows more (at most "
              << kMaxLogBytes << ")\n";
  }
  std::cout << text << std::flush;
  return 0;
}

int cancel(const ClientOptions& client, std::uint32_t job) {
  SchedulerClient connection = open_client(client, "cancel");
  connection.request(message("cancel", {{"job", job}}));
  std::cout << "cancelled job " << job << std::endl;
  return 0;
}

int status(const ClientOptions& client) {
  SchedulerClient connection = open_client(client, "status");
  const Message reply = connection.request(message("status"));
  const json& body = reply.body();
  const json& jobs = body.at("jobs");
  const json& rounds = body.at("rounds");
  std::cout << "run " << body.at("run") << (body.at("recovering").get<bool>() ? " (recovering)" : "") << ": "
            << jobs.at("running") << " running, " << jobs.at("waiting") << " waiting, " << jobs.at("done")
            << " done\n";
  // Older daemons do not say.
  if (body.contains("database") && !body.at("database").at("writable").get<bool>())
    std::cout << "database: cannot write (" << body.at("database").at("error").get<std::string>() << "); "
              << body.at("database").at("unwritten") << " writes wait in memory; no new launches or submissions\n";
  std::cout << "rounds: " << rounds.at("count") << ", p50 " << fixed(rounds.at("p50_ms").get<double>(), 2)
            << " ms, p99 " << fixed(rounds.at("p99_ms").get<double>(), 2) << " ms, max "
            << fixed(rounds.at("max_ms").get<double>(), 2) << " ms\n";
  for (const json& node : body.at("nodes"))
    std::cout << "node " << node.at("name").get<std::string>() << ": "
              << (node.at("up").get<bool>() ? (node.at("connected").get<bool>() ? "up" : "up, disconnected") : "down")
              << ", " << node.at("free_gpus") << " of " << node.at("gpus") << " GPUs free, "
              << node.at("address").get<std::string>() << "\n";
  return 0;
}

int progress(std::int64_t iteration, std::int64_t total) {
  if (iteration < 0 || total < 0) throw UserError("progress: iteration and total must be >= 0");
  if (!tessel::report_progress(iteration, total)) throw UserError("progress: cannot write to $TESSEL_PROGRESS");
  return 0;
}

}  // namespace tessel::cli::nodes

extern "C" __attribute__((visibility("default"))) const tessel::cli::NodesCommands* tessel_nodes_commands() {
  using namespace tessel::cli;
  static constexpr NodesCommands commands{
      kNodesInterface, sizeof(NodesCommands), nodes_layout(), &nodes::message_prefix, &nodes::serve, &nodes::agent,
      &nodes::submit,  &nodes::jobs,          &nodes::cancel, &nodes::status,         &nodes::logs,  &nodes::progress};
  return &commands;
}
