// Recovery after a restart of the real-cluster daemon. The core's API as
// the daemon uses it: restore every job with its counters, adopt the ones
// that still run, end the ones that ended meanwhile; a cluster that grows.
// Then the daemon itself, on loopback (local_cluster.hpp): what happened
// while it was down keeps its facts.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <regex>

#include "fifo_scheduler.hpp"
#include "local_cluster.hpp"
#include "results/sqlite.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

TEST_CASE("restored jobs keep their counters; adopted ones run on, without a new start or attempt") {
  const std::vector<NodeSpec> node{NodeSpec{"n0", "v100", 4, 32, 256, 0}};
  auto before = fifo_scheduler(node);
  before->submit(rigid_job(2, 100), 0);
  before->submit(rigid_job(2, 100), 0);
  before->submit(rigid_job(2, 100), 0);
  before->submit(rigid_job(1, 100), 0);
  RoundOutcome first = before->run_round(0);
  REQUIRE(first.started == std::vector<JobId>{0, 1});
  before->report_progress(0, 40, 10);
  before->complete(3, 10, JobStatus::failed);  // cancelled while pending: it leaves the queue
  CHECK(before->pending().empty());

  // The daemon restarts: the same jobs, in id order; nodes come back later.
  auto after = fifo_scheduler(node);
  for (const JobState* saved : before->jobs()) after->restore(*saved);
  CHECK(after->job(0).status == JobStatus::preempted);  // was running: waits until adopted
  CHECK(after->job(0).executed_work == 40);
  CHECK(after->job(0).attempts == 1);
  CHECK(after->job(2).status == JobStatus::queued);
  CHECK(after->job(3).status == JobStatus::failed);
  CHECK(after->running_count() == 0);

  // Job 0 still runs where it ran; job 1 ended while the daemon was down.
  after->adopt(0, before->job(0).allocation, 20);
  after->complete(1, 20, JobStatus::finished);
  CHECK(after->job(0).running());
  CHECK(after->job(0).attempts == 1);  // the same attempt
  CHECK(after->job(1).finish == 20);
  CHECK(after->cluster().free_gpus() == 2);

  const RoundOutcome next = after->run_round(21);
  CHECK(next.started == std::vector<JobId>{2});  // not job 0: it never stopped
  CHECK(next.preempted.empty());
  after->complete(0, 30, JobStatus::finished);
  CHECK(after->job(0).gpu_seconds == doctest::Approx(before->job(0).gpu_seconds + 2 * 10));
  CHECK_THROWS_AS(after->complete(0, 31), std::logic_error);  // already done
}

TEST_CASE("in a growing cluster a job larger than today's waits for nodes instead of being rejected") {
  auto fixed = fifo_scheduler({NodeSpec{"n0", "v100", 4, 32, 256, 0}});
  CHECK(fixed->submit(rigid_job(8, 10), 0).status == JobStatus::rejected);

  auto growing = fifo_scheduler({});
  growing->expect_growing_cluster();
  CHECK(growing->submit(rigid_job(8, 10), 0).status == JobStatus::pending);
  CHECK(growing->run_round(1).started.empty());
  growing->add_node(NodeSpec{"n0", "v100", 4, 32, 256, 0});
  CHECK(growing->run_round(2).started.empty());
  growing->add_node(NodeSpec{"n1", "v100", 4, 32, 256, 0});
  CHECK(growing->run_round(3).started == std::vector<JobId>{0});
}

TEST_CASE("a job whose run ended unseen starts a new attempt when it runs again") {
  auto core = fifo_scheduler({NodeSpec{"n0", "v100", 4, 32, 256, 0}});
  core->submit(rigid_job(2, 100), 0);
  REQUIRE(core->run_round(0).started == std::vector<JobId>{0});
  CHECK_THROWS_AS(core->end_attempt(0), std::logic_error);  // it runs: the core knows how it ends

  auto after = fifo_scheduler({NodeSpec{"n0", "v100", 4, 32, 256, 0}});
  after->restore(core->job(0));
  after->end_attempt(0);  // its processes were lost while the daemon was down
  REQUIRE(after->run_round(1).started == std::vector<JobId>{0});
  CHECK(after->job(0).attempts == 2);
}

namespace {

std::string recovery_cluster(double node_timeout_seconds) {
  return R"([scheduler]
round_seconds = 0.5
allocation = { plugin = "fifo", backfill = true }
placement = { plugin = "consolidated" }
[serve]
heartbeat_seconds = 0.2
grace_seconds = 1
node_timeout_seconds = )" + std::to_string(node_timeout_seconds) + "\n";
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool any_log_matches(const LocalCluster& cluster, const std::string& pattern) {
  for (const fs::path& log : cluster.logs(0))
    if (std::regex_search(slurp(log), std::regex(pattern))) return true;
  return false;
}

// The time in the first match of `pattern` in a log (its group 1).
double logged_at(const fs::path& log, const std::string& pattern) {
  std::smatch match;
  const std::string text = slurp(log);
  REQUIRE_MESSAGE(std::regex_search(text, match, std::regex(pattern)), text);
  return std::stod(match[1]);
}

double run_epoch(const fs::path& db) {
  sql::Database database(db.string(), false);
  auto query = database.prepare("SELECT epoch FROM cluster_runs");
  REQUIRE(query.step());
  return query.real(0);
}

double real_of(const fs::path& db, const std::string& sql) {
  sql::Database database(db.string(), false);
  auto query = database.prepare(sql);
  REQUIRE(query.step());
  return query.real(0);
}

// One agent, one single-GPU job of `iterations`; once it runs, the
// daemon is killed. Returns the daemon's address, to restart it there.
std::string run_one_job_then_kill_serve(LocalCluster& cluster, int iterations) {
  cluster.start_serve();
  cluster.add_agent("a1", 1);
  cluster.wait_for_nodes(1);
  cluster.submit({1, iterations});
  wait_until([&] { return cluster.jobs().at(0).at("iteration").get<double>() > 10; }, 30, "the job runs",
             [&] { return cluster.diagnostics(); });
  std::string address = cluster.address();
  cluster.kill_serve();
  return address;
}

}  // namespace

TEST_CASE("a job that exits while the daemon is down keeps its real exit time") {
  LocalCluster cluster(recovery_cluster(8));  // a lease long enough to outlast the restart
  const std::string address = run_one_job_then_kill_serve(cluster, 100);
  wait_until([&] { return any_log_matches(cluster, "pid [0-9]+ exited"); }, 10, "the job exits while the daemon is down");
  const double exited = logged_at(cluster.logs(0).at(0), "tessel: ([0-9.]+) pid [0-9]+ exited");
  // Down a while longer: an exit recorded at the restart would be late by that much.
  wait_until([&] { return unix_seconds() > exited + 2; }, 5, "two seconds pass");
  const double restarted = unix_seconds();
  cluster.start_serve(address);
  wait_until([&] { return cluster.all_finished(1); }, 30, "the job is finished", [&] { return cluster.diagnostics(); });

  const fs::path db = cluster.db();
  const double epoch = run_epoch(db);
  CHECK(std::abs(real_of(db, "SELECT finish FROM jobs") + epoch - exited) < 0.25);
  CHECK(real_of(db, "SELECT ended FROM cluster_launches") + epoch < restarted);
  // The run's wall clock counts what the daemons spent on it, not the time it was down.
  wait_until([&] { return count(db, "SELECT count(*) FROM metrics WHERE name = 'finished' AND value = 1") == 1; }, 15,
             "the run's figures count the finished job");
  CHECK(real_of(db, "SELECT end_time - wall_seconds FROM runs") > 2);
}


TEST_CASE("a job stopped by its agent's lease while the daemon is down counts as lost and starts a new attempt") {
  LocalCluster cluster(recovery_cluster(1));  // the agent stops its jobs after a second of silence
  const std::string address = run_one_job_then_kill_serve(cluster, 300);
  wait_until([&] { return any_log_matches(cluster, "train: SIGTERM"); }, 10, "the agent's lease stops the job");
  wait_until([&] { return any_log_matches(cluster, "pid [0-9]+ (exited|killed)"); }, 10, "the job's process is gone");
  cluster.start_serve(address);
  wait_until([&] { return cluster.all_finished(1); }, 60, "the job is finished", [&] { return cluster.diagnostics(); });

  const fs::path db = cluster.db();
  CHECK(count(db, "SELECT count(*) FROM cluster_launches WHERE launch_id = 1 AND outcome = 'lost'") == 1);
  CHECK(count(db, "SELECT count(*) FROM cluster_launches WHERE launch_id = 2 AND resume = 1 AND outcome = 'finished'") == 1);
  CHECK(count(db, "SELECT count(*) FROM jobs WHERE status = 'finished' AND executed_work = total_work AND attempts = 2") == 1);
}
