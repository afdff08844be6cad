#include "daemon.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>

#include <boost/asio/post.hpp>

#include "config/sweep.hpp"
#include "engine/errors.hpp"
#include "models/models.hpp"
#include "plugins/composition.hpp"
#include "daemon_state.hpp"
#include "job_process.hpp"
#include "log_line.hpp"
#include "results/summary.hpp"
#include "slurm_executor.hpp"

namespace tessel::cluster {

namespace {

// The note of a run that serve stopped: it is not over.
constexpr const char* kStoppedNote = "the scheduler stopped; `tessel serve` on this database resumes the run";
constexpr double kHandshakeSeconds = 5;
constexpr double kWatchSeconds = 0.1;
// A failed accept (no descriptors left) is tried again this much later: as
// often as the watch, so a freed descriptor is used within a watch tick.
constexpr double kAcceptRetrySeconds = 0.1;
constexpr std::size_t kMaxListedJobs = 50'000;
constexpr double kCountersSeconds = 5;
constexpr double kCheckpointSeconds = 10;
// How often a journal that cannot write tries again: space that returns is
// used within a second, and a try (one transaction of the writes that wait,
// a few rows per exit) costs little against a full disk.
constexpr double kRetrySeconds = 1;

// [serve]'s TLS settings, named as the config file names them.
TlsSettings tls_settings(const ServeConfig& serve) {
  TlsSettings tls;
  tls.insecure = serve.insecure;
  tls.cert = serve.tls_cert;
  tls.key = serve.tls_key;
  tls.ca = serve.tls_ca;
  tls.names = {"[serve] tls_cert", "[serve] tls_key", "[serve] tls_ca"};
  tls.insecure_name = "[serve] insecure";
  return tls;
}

// Names this run's Slurm jobs: the same for the same database and run after
// a restart, and another for every other run (FNV-1a of the database's path).
std::string slurm_tag(const std::string& database, std::int64_t run) {
  std::uint32_t hash = 2166136261u;
  for (const char c : std::filesystem::absolute(database).lexically_normal().string())
    hash = (hash ^ static_cast<unsigned char>(c)) * 16777619u;
  char text[16];
  std::snprintf(text, sizeof text, "%08x", hash);
  return text + ("r" + std::to_string(run));
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

SchedulerDaemon::SchedulerDaemon(asio::io_context& io, const ExperimentConfig& config, PluginRegistry& registry,
                                 Secret secret, DaemonOptions options)
    : io_(io), config_(config), serve_(config.serve), secret_(std::move(secret)),
      tls_(make_tls(tls_settings(config.serve), secret_, TlsContext::Side::server)),
      slurm_(config.serve.executor != "slurm"
                 ? nullptr
                 : std::make_unique<SlurmExecutor>(io, config.serve.slurm_partition,
                                                   [this](const std::string& node, const json& report) {
                                                     on_slurm_report(node, report);
                                                   })),
      journal_(options.database, RunInfo{options.label.empty() ? config.output.label : options.label, "{}",
                                         config.document->text(), 0, "cluster",
                                         configuration_fingerprint(*config.document)},
               options.new_run),
      decisions_(config.output.decisions), round_timer_(io), watch_timer_(io), accept_timer_(io),
      buffer_budget_(std::make_shared<BufferBudget>(
          BufferBudget{static_cast<std::size_t>(config.serve.max_buffered_mib) * 1024 * 1024, 0})) {
  ComposedScheduler plugins = [&] {
    try {
      return compose_scheduler(config.scheduler, registry, 0, config.document->base_directory().string());
    } catch (const Interrupted& e) {  // Ctrl-C as a policy's module or constructor ran
      journal_.mark_run("interrupted", kStoppedNote);
      throw e.marking(1);
    }
  }();
  SchedulerSettings settings = config.scheduler.settings;
  settings.restart_seconds = 0;  // on real nodes a restart costs what it really costs
  // The model's arguments and data files are checked here, before anything listens.
  core_ = std::make_unique<Scheduler>(std::move(plugins), ClusterState{}, build_throughput_model(serve_.model),
                                      settings, &decisions_);
  core_->expect_growing_cluster();
  // A launch owns its GPUs here (the gate lets one launch on a GPU at a
  // time), so a model that prices co-located jobs would have the core count
  // as running a job that waits for its partner's GPUs.
  if (core_->model().max_colocated() > 1)
    throw UserError("[serve] model: '" + std::string(core_->model().name()) +
                    "' prices jobs sharing a GPU, which real nodes do not run: space sharing is simulated only");

  RecoveredRun recovered = journal_.recover();
  next_launch_ = recovered.next_launch;
  capacity_gpu_seconds_ = recovered.capacity_gpu_seconds;
  rounds_ = recovered.rounds;
  const double t = now();
  for (JobRecordFull& saved : recovered.jobs) {
    saved.state.waiting_since = t;
    core_->restore(saved.state);
    jobs_.push_back(JobEntry{std::move(saved.request), saved.cancelled, 0, saved.state.attempts, {}, {}});
  }
  for (const LaunchRecord& record : recovered.launches)
    if (record.job < jobs_.size()) {
      JobEntry& entry = jobs_[record.job];
      entry.history.push_back(record);
      if (record.outcome == "failed") entry.last_error = failure_of(record);
    }
  // A job whose last launch failed waits out its back-off as if the daemon
  // had not stopped: a restart is no shortcut to a retry.
  for (JobId id = 0; id < jobs_.size(); ++id) {
    const JobEntry& entry = jobs_[id];
    if (entry.history.empty() || !core_->job(id).waiting()) continue;
    const LaunchRecord& last = entry.history.back();
    if (last.outcome != "failed" || !last.ended) continue;
    const double until = *last.ended + retry_wait(core_->job(id).attempts);
    if (until > t) core_->hold_until(id, until);
  }
  recovered_jobs_ = recovered.jobs.size();
  double longest_grace = 0;
  for (const LaunchRecord& record : recovered.open_launches) {
    if (record.job >= jobs_.size()) continue;
    auto launch = std::make_unique<Launch>();
    launch->id = record.id;
    launch->job = record.job;
    launch->resume = record.resume;
    launch->decided = record.decided;
    launch->stop_reason = record.outcome;
    launch->recovered = true;
    launch->recovering = true;
    launch->dispatched = true;
    // Its rank 0 may still listen there: dispatch gives the port to no other launch.
    launch->master_port = record.master_port;
    for (const RankRecord& r : record.ranks) {
      Rank rank;
      rank.record = r;
      rank.sent = true;
      rank.gone = r.exited();
      launch->ranks.push_back(std::move(rank));
    }
    if (record.outcome.empty() && !core_->job(record.job).done()) jobs_[record.job].current = record.id;
    longest_grace = std::max(longest_grace, grace_of(record.job));
    launches_.emplace(record.id, std::move(launch));
  }
  if (!launches_.empty()) {
    recovering_ = true;
    // By then every agent that lost us has stopped its jobs (its lease) and
    // their grace has passed.
    recovery_deadline_ = t + serve_.node_timeout_seconds + longest_grace + 1;
  }
  if (slurm_) {
    // Its reports wait for the event loop, which start() precedes.
    const std::string folder = serve_.slurm_log_dir.empty() ? options.database + ".slurm" : serve_.slurm_log_dir;
    slurm_->start(std::filesystem::absolute(folder) / ("run-" + std::to_string(journal_.run())),
                  slurm_tag(options.database, journal_.run()), serve_.heartbeat_seconds,
                  // A command given up by then leaves the next poll time to
                  // report before the daemon counts the nodes down.
                  serve_.node_timeout_seconds / 2);
  }
}

SchedulerDaemon::~SchedulerDaemon() = default;

double SchedulerDaemon::now() const { return unix_now() - journal_.epoch(); }

double SchedulerDaemon::grace_of(JobId job) const {
  return jobs_[job].request.grace_seconds.value_or(serve_.grace_seconds);
}

void SchedulerDaemon::log(const std::string& line) const { log_line("tessel serve", line); }

SchedulerDaemon::NodeEntry* SchedulerDaemon::node_named(const std::string& name) {
  return const_cast<NodeEntry*>(std::as_const(*this).node_named(name));
}

const SchedulerDaemon::NodeEntry* SchedulerDaemon::node_named(const std::string& name) const {
  for (const auto& node : nodes_)
    if (node->name == name) return node.get();
  return nullptr;
}

RoundTimes SchedulerDaemon::round_times() const {
  RoundTimes t;
  t.rounds = static_cast<std::uint64_t>(rounds_);
  if (round_ms_.empty()) return t;
  std::vector<double> sorted = round_ms_;
  std::sort(sorted.begin(), sorted.end());
  t.last_ms = round_ms_.back();
  t.p50_ms = percentile(sorted, 50);
  t.p99_ms = percentile(sorted, 99);
  t.max_ms = sorted.back();
  t.recent_ms.assign(round_ms_.end() - std::min<std::ptrdiff_t>(20, std::ssize(round_ms_)), round_ms_.end());
  return t;
}

// ------------------------------------------------------------------ connections

void SchedulerDaemon::Peer::send(const json& order) {
  if (slurm != nullptr) return slurm->order(slurm_node, Message(order));
  connection->send(order);
}

void SchedulerDaemon::Peer::close(const std::string& why) {
  if (slurm != nullptr) return slurm->node_closed(slurm_node);
  connection->close(why);
}

std::string SchedulerDaemon::Peer::where() const { return slurm != nullptr ? "Slurm" : connection->peer(); }

void SchedulerDaemon::on_slurm_report(const std::string& node, const json& report) {
  std::shared_ptr<Peer>& peer = slurm_peers_[node];
  if (peer == nullptr) {
    peer = std::make_shared<Peer>(nullptr, secret_);
    peer->role = Peer::Role::agent;
    peer->slurm = slurm_.get();
    peer->slurm_node = node;
  }
  try {
    on_message(peer, Message(report));
  } catch (const ProtocolError& e) {
    log("the Slurm executor's report for " + node + " was refused: " + e.what());
  }
}

tcp::endpoint SchedulerDaemon::listen(const std::string& host_port) {
  const auto [host, port] = split_host_port(host_port, "--listen");
  boost::system::error_code error;
  const auto address = asio::ip::make_address(host, error);
  if (error) throw UserError("--listen '" + host_port + "': '" + host + "' is not an IP address");
  acceptor_.emplace(io_);
  const tcp::endpoint endpoint(address, port);
  acceptor_->open(endpoint.protocol(), error);
  if (!error) acceptor_->set_option(tcp::acceptor::reuse_address(true), error);
  if (!error) acceptor_->bind(endpoint, error);
  if (!error) acceptor_->listen(asio::socket_base::max_listen_connections, error);
  if (error) throw UserError("cannot listen on " + host_port + ": " + error.message());
  return acceptor_->local_endpoint();
}

void SchedulerDaemon::start() {
  if (!tls_)
    log("warning: [serve] insecure = true: every frame, job commands and environments included, crosses the "
        "network in clear; agents and clients must pass --insecure");
  journal_.run_started();
  capacity_since_ = now();
  if (journal_.resumed())
    log("resumed run " + std::to_string(journal_.run()) + ": " + std::to_string(recovered_jobs_) + " jobs, " +
        std::to_string(launches_.size()) + " launches to confirm");
  accept();
  next_round_at_ = Clock::now();
  schedule_round();
  watch();
}

void SchedulerDaemon::stop() {
  if (stopped_) return;
  stopped_ = true;
  round_timer_.cancel();
  watch_timer_.cancel();
  accept_timer_.cancel();
  if (acceptor_) acceptor_->close();
  for (const auto& peer : std::set(peers_)) peer->connection->close("scheduler stopping");
  if (slurm_) slurm_->stop();  // its jobs go on, for the next `tessel serve` to adopt
  save_running_jobs();
  journal_.run_ended(totals());
  journal_.mark_run("interrupted", kStoppedNote);
  if (!journal_.retry())
    log("stopping with " + std::to_string(journal_.unwritten()) +
        " writes unsaved; the next `tessel serve` recovers from what the database holds");
}

void SchedulerDaemon::accept() {
  acceptor_->async_accept([this](boost::system::error_code error, tcp::socket socket) {
    if (stopped_) return;
    if (error) {
      // Out of descriptors (EMFILE) fails at once, every time: log it once
      // and wait before trying again, instead of spinning on it.
      if (!accept_failing_) log("cannot accept connections: " + error.message() + "; retrying every 0.1 s");
      accept_failing_ = true;
      accept_timer_.expires_after(seconds(kAcceptRetrySeconds));
      accept_timer_.async_wait([this](boost::system::error_code e) {
        if (!e && !stopped_) accept();
      });
      return;
    }
    if (accept_failing_) log("accepting connections again");
    accept_failing_ = false;
    auto connection = std::make_shared<Connection>(std::move(socket), kMaxHandshakeFrameBytes, tls_);
    auto peer = std::make_shared<Peer>(connection, secret_);
    peers_.insert(peer);
    std::weak_ptr<Peer> weak = peer;
    connection->set_frame_timeout(serve_.frame_timeout_seconds);
    connection->set_budget(buffer_budget_);
    connection->start(
        [this, weak](const Message& m) {
          if (auto p = weak.lock()) on_message(p, m);
        },
        [this, weak](const std::string& why) {
          if (auto p = weak.lock()) on_closed(p, why);
        });
    connection->send(peer->handshake.challenge());
    // The hello is a frame owed from connect: the same deadline as any
    // frame's, started earlier, and shorter. It covers the TLS handshake.
    connection->expect_frame_within(kHandshakeSeconds, "no handshake within 5 s");
    accept();
  });
}

void SchedulerDaemon::on_closed(const std::shared_ptr<Peer>& peer, const std::string& why) {
  peers_.erase(peer);
  if (peer->role == Peer::Role::handshaking) {
    log("dropped " + peer->connection->peer() + " before it authenticated: " + why);
  } else if (peer->role == Peer::Role::agent && peer->node != nullptr && peer->node->agent == peer) {
    // Silence from here on; the node is down once it lasts a node timeout.
    peer->node->agent = nullptr;
    log("agent " + peer->node->name + " disconnected: " + why);
    fail_log_requests(*peer->node, "disconnected");
  } else if (peer->role == Peer::Role::client && why != "peer closed the connection") {
    log("dropped client " + peer->connection->peer() + ": " + why);
  }
}

void SchedulerDaemon::authenticate(const std::shared_ptr<Peer>& peer, const Message& hello) {
  std::string why;
  const auto role = peer->handshake.check(hello, why);
  if (!role) {
    log("refused " + peer->connection->peer() + ": " + why);
    peer->connection->send(message("refused", {{"reason", why}}));
    peer->connection->close_after_sending("refused: " + why);
    return;
  }
  peer->role = *role == Role::agent ? Peer::Role::agent : Peer::Role::client;
  peer->connection->set_max_payload(kMaxFrameBytes);
  peer->connection->send(peer->handshake.welcome());
}

void SchedulerDaemon::on_message(const std::shared_ptr<Peer>& peer, const Message& m) {
  switch (peer->role) {
    case Peer::Role::handshaking: return authenticate(peer, m);
    case Peer::Role::agent:
      if (m.type() == "register") return on_register(peer, m);
      if (peer->node == nullptr || peer->node->agent != peer) throw ProtocolError("agent sent '" + m.type() + "' before registering");
      peer->node->last_heard = Clock::now();
      if (m.type() == "heartbeat") return on_heartbeat(*peer->node, m);
      if (m.type() == "started") return on_started(*peer->node, m);
      if (m.type() == "exited") return on_exited(*peer->node, m);
      if (m.type() == "log") return on_log(*peer->node, m);
      throw ProtocolError("unknown agent message '" + m.type() + "'");
    case Peer::Role::client: {
      json reply;
      try {
        if (m.type() == "submit" || m.type() == "submit_batch") return queue_submission(peer, m);
        // Replies keep the order of requests: the submissions queued before
        // this request are answered first.
        commit_submissions();
        if (m.type() == "jobs") reply = on_jobs(m);
        else if (m.type() == "cancel") reply = on_cancel(m);
        else if (m.type() == "status") reply = on_status();
        else if (m.type() == "logs") return on_logs(peer, m);  // answered once the agent has
        else throw ProtocolError("unknown request '" + m.type() + "'");
      } catch (const RequestError& e) {
        // The client asked for something impossible; it hears why and may go on.
        commit_submissions();
        reply = message("error", {{"message", e.what()}});
      }
      peer->connection->send(reply);
      return;
    }
  }
}

// ------------------------------------------------------------------ clients

void SchedulerDaemon::queue_submission(const std::shared_ptr<Peer>& peer, const Message& m) {
  PendingSubmission submission{peer, {}, m.type() == "submit_batch"};
  if (!submission.batch) {
    submission.jobs.push_back(JobRequest::from_json(m.object("job")));
  } else {
    const json& list = m.array("jobs");
    if (list.empty()) throw RequestError("the batch has no jobs");
    if (list.size() > kMaxBatchJobs)
      throw RequestError("the batch has " + std::to_string(list.size()) + " jobs, over the " +
                         std::to_string(kMaxBatchJobs) + " one request may carry; none was submitted");
    for (std::size_t i = 0; i < list.size(); ++i) try {
        submission.jobs.push_back(JobRequest::from_json(list[i]));
      } catch (const ProtocolError& e) {
        throw RequestError("job " + std::to_string(i + 1) + " of the batch: " + e.what() + "; none was submitted");
      }
  }
  for (JobRequest& request : submission.jobs)
    if (request.tenant.empty()) request.tenant = "unknown";
  require_writable();
  // Posted after whatever the reactor has already handed over, so the
  // submissions that arrived together land together.
  if (pending_submissions_.empty())
    asio::post(io_, [this] {
      if (!stopped_) commit_submissions();
    });
  pending_submissions_.push_back(std::move(submission));
}

void SchedulerDaemon::commit_submissions() {
  if (pending_submissions_.empty()) return;
  std::vector<PendingSubmission> pending = std::exchange(pending_submissions_, {});
  std::vector<std::vector<JobId>> ids(pending.size());
  const double t = now();
  if (journal_.writable()) {
    auto transaction = journal_.transaction();
    for (std::size_t i = 0; i < pending.size(); ++i)
      for (JobRequest& request : pending[i].jobs) {
        JobState& job = core_->submit(request.spec(t), t);
        ids[i].push_back(job.spec.id);
        journal_.save_submission(job_record(job), request);
        jobs_.push_back(JobEntry{std::move(request), false, 0, 0, {}, {}});
      }
    transaction.commit();
    ++submit_commits_;
    if (!journal_.writable()) {
      // The disk refused these very submissions. Their ids are taken (ids
      // are positions), so they stay, cancelled before they ran, and are
      // saved so once the disk takes writes again; the clients hear they
      // were refused.
      for (const auto& list : ids)
        for (JobId id : list) {
          jobs_[id].cancelled = true;
          core_->complete(id, t, JobStatus::failed);
          save_job(id);
        }
    } else {
      for (const auto& list : ids) submitted_jobs_ += list.size();
    }
  }
  for (std::size_t i = 0; i < pending.size(); ++i) {
    const auto peer = pending[i].peer.lock();
    if (peer == nullptr) continue;  // gone before its answer; what it submitted stands
    if (!journal_.writable())
      peer->connection->send(message("error", {{"message", cannot_write()}}));
    else if (pending[i].batch)
      peer->connection->send(message("submitted", {{"jobs", ids[i]}}));
    else
      peer->connection->send(message("submitted", {{"job", ids[i].front()}}));
  }
}

json SchedulerDaemon::on_jobs(const Message& m) {
  const std::size_t limit = m.has("limit") ? static_cast<std::size_t>(m.integer("limit", 0, kMaxListedJobs)) : 0;
  const std::size_t count = core_->job_count();
  const std::size_t wanted = limit == 0 ? std::min(count, kMaxListedJobs) : std::min(limit, count);
  json list = json::array();
  for (std::size_t id = count - wanted; id < count; ++id) {
    const JobState& job = core_->job(static_cast<JobId>(id));
    const JobEntry& entry = jobs_[id];
    std::string status = entry.cancelled ? "cancelled" : std::string(to_string(job.status));
    json nodes = json::array();
    auto add_node = [&nodes](const std::string& node) {
      if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) nodes.push_back(node);
    };
    if (const auto it = launches_.find(entry.current); it != launches_.end()) {
      const Launch& launch = *it->second;
      if (job.running() && !launch.dispatched) status = "starting";
      for (const Rank& rank : launch.ranks) add_node(rank.record.node);
    } else if ((job.done() || entry.cancelled) && !entry.history.empty()) {
      for (const RankRecord& rank : entry.history.back().ranks) add_node(rank.node);  // where it ran last
    }
    json row = {{"id", id},
                {"name", job.spec.name},
                {"tenant", job.spec.tenant},
                {"status", status},
                {"gpus", job.running() ? job.allocation.gpu_count() : job.spec.gpus},
                {"iteration", job.executed_work},
                {"preemptions", job.preemptions},
                {"attempts", job.attempts},
                {"submitted", job.spec.arrival},
                {"nodes", nodes}};
    if (entry.request.iterations) row["iterations"] = *entry.request.iterations;
    if (job.first_start) row["started"] = *job.first_start;
    if (job.finish) row["finished"] = *job.finish;
    if (job.first_start) row["started_at"] = iso8601_utc(journal_.epoch() + *job.first_start);
    if (job.finish) row["finished_at"] = iso8601_utc(journal_.epoch() + *job.finish);
    if (!entry.last_error.empty()) row["last_error"] = entry.last_error;
    list.push_back(std::move(row));
  }
  // Job times are seconds since the run's time 0, which is `epoch` (Unix seconds).
  json reply = {{"jobs", list}, {"total", count}, {"epoch", journal_.epoch()}};
  if (!journal_.writable()) reply["database_error"] = journal_.write_error();
  return message("jobs", std::move(reply));
}

std::string SchedulerDaemon::cannot_write() const {
  return "the scheduler cannot write its database: " + journal_.write_error();
}

void SchedulerDaemon::require_writable() const {
  if (!journal_.writable()) throw RequestError(cannot_write());
}

json SchedulerDaemon::on_cancel(const Message& m) {
  const auto id = static_cast<JobId>(m.integer("job", 0, 0xfffffffe));
  if (id >= core_->job_count()) throw RequestError("no job " + std::to_string(id));
  JobEntry& entry = jobs_[id];
  const JobState& job = core_->job(id);
  if (job.done() || entry.cancelled)
    throw RequestError("job " + std::to_string(id) + " has already ended (" +
                        (entry.cancelled ? "cancelled" : std::string(to_string(job.status))) + ")");
  require_writable();
  auto transaction = journal_.transaction();
  entry.cancelled = true;
  core_->complete(id, now(), JobStatus::failed);
  stop_current_launch(id, "cancelled");
  save_job(id);
  transaction.commit();
  open_gate();
  return message("cancelled", {{"job", id}});
}

json SchedulerDaemon::on_status() {
  json nodes = json::array();
  for (const auto& node : nodes_) {
    int free = 0;
    for (const Gpu& gpu : core_->cluster().gpus_of(node->id)) free += gpu.free();
    nodes.push_back({{"name", node->name},
                     {"up", node->up},
                     {"connected", node->agent != nullptr},
                     {"address", node->address},
                     {"gpus", node->gpu_indices.size()},
                     {"free_gpus", free}});
  }
  const RoundTimes t = round_times();
  std::size_t running = 0, waiting = 0, done = 0;
  for (const JobState* job : core_->jobs()) (job->running() ? running : job->done() ? done : waiting)++;
  return message("status", {{"run", journal_.run()},
                            {"nodes", nodes},
                            {"jobs", {{"running", running}, {"waiting", waiting}, {"done", done}}},
                            {"recovering", recovering_},
                            {"submissions", {{"jobs", submitted_jobs_}, {"commits", submit_commits_}}},
                            {"database", {{"writable", journal_.writable()},
                                          {"error", journal_.write_error()},
                                          {"unwritten", journal_.unwritten()}}},
                            {"rounds", {{"count", t.rounds}, {"last_ms", t.last_ms}, {"p50_ms", t.p50_ms},
                                        {"p99_ms", t.p99_ms}, {"max_ms", t.max_ms}, {"recent_ms", t.recent_ms}}}});
}

void SchedulerDaemon::on_logs(const std::shared_ptr<Peer>& client, const Message& m) {
  const auto id = static_cast<JobId>(m.integer("job", 0, 0xfffffffe));
  if (id >= core_->job_count()) throw RequestError("no job " + std::to_string(id));
  const JobEntry& entry = jobs_[id];
  if (entry.history.empty())
    throw RequestError("job " + std::to_string(id) + " has never been launched (it is " +
                       (entry.cancelled ? "cancelled" : std::string(to_string(core_->job(id).status))) + ")");
  const LaunchRecord* launch = &entry.history.back();
  if (m.has("launch") && m.integer("launch", 0) != 0) {
    const auto wanted = static_cast<LaunchId>(m.integer("launch", 0));
    const auto it = std::find_if(entry.history.begin(), entry.history.end(),
                                 [&](const LaunchRecord& l) { return l.id == wanted; });
    if (it == entry.history.end()) {
      std::string ids;
      for (const LaunchRecord& l : entry.history) ids += (ids.empty() ? "" : ", ") + std::to_string(l.id);
      throw RequestError("job " + std::to_string(id) + " has no launch " + std::to_string(wanted) + "; its launches are " + ids);
    }
    launch = &*it;
  }
  const auto rank = static_cast<int>(m.integer("rank", 0, 1 << 20));
  if (rank >= std::ssize(launch->ranks))
    throw RequestError("launch " + std::to_string(launch->id) + " of job " + std::to_string(id) + " has ranks 0 to " +
                       std::to_string(launch->ranks.size() - 1) + "; there is no rank " + std::to_string(rank));
  const std::int64_t max_bytes = m.integer("max_bytes", 0, kMaxLogBytes);
  const std::string& node_name = launch->ranks[rank].node;
  const NodeEntry* node = node_named(node_name);
  if (node == nullptr || node->agent == nullptr)
    throw RequestError("node " + node_name + " is not connected; its log is at " + log_location(node_name, id, rank) +
                       " on that node");
  const std::uint64_t request = next_log_request_++;
  log_requests_[request] = {client, node_name,
                            {{"job", id}, {"launch", launch->id}, {"rank", rank}, {"node", node_name}}};
  node->agent->send(message("read_log", {{"request", request}, {"job", id}, {"rank", rank},
                                                     {"max_bytes", max_bytes}}));
}

void SchedulerDaemon::on_log(NodeEntry& node, const Message& m) {
  const auto it = log_requests_.find(static_cast<std::uint64_t>(m.integer("request", 0)));
  if (it == log_requests_.end() || it->second.node != node.name) return;
  LogRequest request = std::move(it->second);
  log_requests_.erase(it);
  const auto client = request.client.lock();
  if (client == nullptr) return;  // it left meanwhile
  if (m.has("error")) {
    client->connection->send(message("error", {{"message", m.text("error")}}));
    return;
  }
  json& reply = request.reply;
  reply["path"] = m.text("path");
  reply["size"] = m.integer("size", 0);
  reply["from"] = m.integer("from", 0);
  reply["text"] = m.text("text");
  client->connection->send(message("log", std::move(reply)));
}

void SchedulerDaemon::fail_log_requests(const NodeEntry& node, const std::string& why) {
  for (auto it = log_requests_.begin(); it != log_requests_.end();) {
    if (it->second.node != node.name) {
      ++it;
      continue;
    }
    const json& asked = it->second.reply;
    if (const auto client = it->second.client.lock())
      client->connection->send(message(
          "error", {{"message", "node " + node.name + " " + why + " before sending the log; it is at " +
                                    log_location(node.name, asked.at("job").get<JobId>(), asked.at("rank").get<int>()) +
                                    " on that node"}}));
    it = log_requests_.erase(it);
  }
}

std::string SchedulerDaemon::log_location(const std::string& node_name, JobId job, int rank) const {
  const NodeEntry* node = node_named(node_name);
  if (node != nullptr && !node->log_dir.empty()) return rank_log_path(node->log_dir, job, rank).string();
  // Its agent has not registered with this daemon since it restarted.
  return rank_log_path("", job, rank).string() + " under its agent's --log-dir";
}

// ------------------------------------------------------------------ time

void SchedulerDaemon::schedule_round() {
  next_round_at_ += seconds(config_.scheduler.settings.round_seconds);
  // After a long stall, start afresh instead of running rounds back to back.
  if (next_round_at_ < Clock::now()) next_round_at_ = Clock::now() + seconds(config_.scheduler.settings.round_seconds);
  round_timer_.expires_at(next_round_at_);
  round_timer_.async_wait([this](boost::system::error_code error) {
    if (error || stopped_) return;
    round();
    schedule_round();
    if (now() >= checkpointed_at_ + kCheckpointSeconds) {
      journal_.checkpoint();
      checkpointed_at_ = now();
    }
  });
}

void SchedulerDaemon::round() {
  // No decisions while the journal cannot write: a launch must be saved
  // before any agent hears of it. The jobs that run go on.
  if (recovering_ || !journal_.writable()) return;
  const auto started = Clock::now();
  const double t = now();
  auto transaction = journal_.transaction();
  const RoundOutcome outcome = core_->run_round(t);
  for (JobId id : outcome.preempted) stop_current_launch(id, "preempted");
  for (const ResizeOutcome& resize : outcome.resized) relaunch_resized(resize, "resized", t);
  for (JobId id : outcome.started) create_launch(id, core_->job(id).allocation, jobs_[id].launches > 0);

  const ClusterState& cluster = core_->cluster();
  capacity_gpu_seconds_ += cluster.total_gpus() * std::max(0.0, t - capacity_since_);
  capacity_since_ = t;
  ++rounds_;
  for (JobId id : outcome.preempted) save_job(id);
  for (JobId id : outcome.started) save_job(id);
  const auto active = static_cast<int>(core_->active().size());
  const auto running = static_cast<int>(core_->running_count());
  journal_.sampled({t, cluster.total_gpus(), cluster.total_gpus() - cluster.free_gpus(), running, active - running,
                    static_cast<int>(core_->pending().size()), cluster.shared_gpus()});
  // Running jobs' counters grow every round, and the run's totals and
  // figures (which read every job) with them; writing them every few seconds
  // is enough for `report`, and keeps rounds short. State changes are
  // written when they happen.
  if (t >= counters_saved_at_ + kCountersSeconds) {
    save_running_jobs();
    journal_.run_ended(totals());
    counters_saved_at_ = t;
  }
  save_decisions();
  transaction.commit();
  open_gate();

  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
  if (round_ms_.size() == 1000) round_ms_.erase(round_ms_.begin());
  round_ms_.push_back(ms);
}

void SchedulerDaemon::save_running_jobs() {
  for (JobState* job : core_->active())
    if (job->running()) save_job(job->spec.id);
}

void SchedulerDaemon::save_decisions() {
  // The log keeps every decision it records in memory; they are written
  // once and then only the new ones.
  const auto& decided = decisions_.records();
  for (; decisions_saved_ < decided.size(); ++decisions_saved_) journal_.decided(decided[decisions_saved_]);
}

void SchedulerDaemon::save_job(JobId id) {
  JobRecord record = job_record(core_->job(id));
  if (jobs_[id].cancelled) record.status = "cancelled";
  journal_.job_changed(record);
}

RunTotals SchedulerDaemon::totals() const {
  RunTotals totals;
  totals.cluster_gpus = core_->cluster().installed_gpus();
  totals.capacity_gpu_seconds = capacity_gpu_seconds_;
  totals.end_time = now();
  totals.events = static_cast<std::uint64_t>(rounds_);
  return totals;
}

void SchedulerDaemon::retry_writes() {
  if (journal_.writable() || now() < retried_at_ + kRetrySeconds) return;
  retried_at_ = now();
  if (!journal_.retry()) return;
  for (const auto& [name, launch, rank] : std::exchange(held_exit_acks_, {}))
    if (NodeEntry* node = node_named(name); node != nullptr && node->agent != nullptr)
      node->agent->send(message("exit_recorded", {{"launch", launch}, {"rank", rank}}));
  open_gate();
}

void SchedulerDaemon::watch() {
  retry_writes();
  const double t = now();
  const auto timeout = seconds(serve_.node_timeout_seconds);
  for (auto& node : nodes_)
    if (node->up && Clock::now() - node->last_heard > timeout) {
      auto transaction = journal_.transaction();
      node_down(*node, "silent for " + std::to_string(serve_.node_timeout_seconds) + " s");
      transaction.commit();
    }
  // Ranks on silent nodes whose lease and grace have surely run out.
  std::vector<LaunchId> ids;
  for (auto& [id, launch] : launches_) ids.push_back(id);
  for (LaunchId id : ids) {
    auto it = launches_.find(id);
    if (it == launches_.end()) continue;
    Launch& launch = *it->second;
    if (launch.exit_window_ends && *launch.exit_window_ends <= t && launch.stop_reason.empty() && !launch.recovering) {
      log("job " + std::to_string(launch.job) + " finished its training, but some of its processes did not exit within " +
          std::to_string(grace_of(launch.job)) + " s: stopping them");
      auto transaction = journal_.transaction();
      abandon(launch, "finished");
      transaction.commit();
    }
    bool expired = false;
    for (Rank& rank : launch.ranks)
      if (!rank.gone && rank.lost_at && *rank.lost_at <= t) {
        rank_gone(launch, rank, std::nullopt, 0);
        expired = true;
      }
    if (recovering_ && launch.recovering && t >= recovery_deadline_)
      for (Rank& rank : launch.ranks)
        if (!rank.gone && !rank.confirmed) {
          rank_gone(launch, rank, std::nullopt, 0);
          expired = true;
        }
    if (expired) {
      auto transaction = journal_.transaction();
      if (launch.recovering) resolve_recovered(launch);
      else end_if_done(id);
      transaction.commit();
      open_gate();
    }
  }
  if (recovering_) {
    bool still = false;
    for (auto& [id, launch] : launches_) still = still || launch->recovering;
    if (!still) {
      recovering_ = false;
      log("recovery done: " + std::to_string(core_->running_count()) + " jobs still running were adopted");
    }
  }
  watch_timer_.expires_after(seconds(kWatchSeconds));
  watch_timer_.async_wait([this](boost::system::error_code error) {
    if (!error && !stopped_) watch();
  });
}

}  // namespace tessel::cluster
