// What an operator of real nodes sees: `tessel logs`, the last error and
// where its log is, retries that back off, ISO 8601 times in `tessel jobs`
// and in the serve and agent logs, progress reported while a job stops, and
// a working directory missing on the node. `tessel serve` and `tessel agent`
// processes on loopback (local_cluster.hpp).
#include <doctest/doctest.h>

#include <map>
#include <regex>
#include <sstream>

#include "local_cluster.hpp"
#include "results/sqlite.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

const char* kFifo = R"([scheduler]
round_seconds = 0.2
allocation = { plugin = "fifo", backfill = true }
placement = { plugin = "consolidated" }
[serve]
heartbeat_seconds = 0.2
node_timeout_seconds = 5
grace_seconds = 2
)";

// Submits `script` (run by /bin/sh -c) as a one-GPU job in `workdir`; returns its id.
int submit_script(LocalCluster& cluster, const std::string& script, const std::string& workdir) {
  const CommandResult result =
      cluster.tessel({"submit", "--workdir", workdir, "--grace-seconds", "2", "--", "/bin/sh", "-c", script});
  REQUIRE_MESSAGE(result.code == 0, result.err);
  std::smatch match;
  REQUIRE(std::regex_search(result.out, match, std::regex("submitted job ([0-9]+)")));
  return std::stoi(match[1]);
}

json job_row(LocalCluster& cluster, int id) { return cluster.jobs().at(static_cast<std::size_t>(id)); }

const std::regex kIsoLogLine(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z tessel (serve|agent): .*)");

}  // namespace

TEST_CASE("tessel logs fetches a rank's log through its agent, bounded, with clear errors") {
  LocalCluster cluster(kFifo);
  cluster.start_serve();
  cluster.add_agent("a1", 2);
  cluster.wait_for_nodes(1);
  const std::string work = cluster.dir().string();
  // 3,000 numbered lines, then a marker: more than a small --bytes shows.
  const int done = submit_script(cluster, "i=0; while [ $i -lt 3000 ]; do echo line $i; i=$((i+1)); done; echo THE-END", work);
  const int big = cluster.submit({4, 10});  // 4 GPUs on a 2-GPU cluster: never launched
  wait_until([&] { return job_row(cluster, done).at("status") == "finished"; }, 30, "the job finishes",
             [&] { return cluster.diagnostics(); });

  const CommandResult whole = cluster.tessel({"logs", std::to_string(done)});
  REQUIRE_MESSAGE(whole.code == 0, whole.err);
  CHECK(whole.out.find("line 0\n") != std::string::npos);
  CHECK(whole.out.find("THE-END\n") != std::string::npos);
  CHECK(whole.out.find("tessel: ") != std::string::npos);  // tessel's own lines, with the output between
  const std::string path = (cluster.dir() / "logs-a1" / "job-0" / "rank-0.log").string();
  CHECK(whole.out == slurp(path));
  CHECK(whole.err.find("launch 1, rank 0: a1:" + path) != std::string::npos);

  // The end only, cut at a line's start, and said so.
  const CommandResult tail = cluster.tessel({"logs", std::to_string(done), "--bytes", "200"});
  REQUIRE_MESSAGE(tail.code == 0, tail.err);
  CHECK(tail.out.size() <= 200);
  CHECK(tail.out.find("THE-END") != std::string::npos);
  CHECK(tail.out.find("line 0\n") == std::string::npos);
  CHECK(tail.out.rfind("line ", 0) == 0);  // starts with a whole line
  CHECK(tail.err.find("showing its last") != std::string::npos);

  // The user's mistakes: exit 2, saying what is wrong.
  const auto refused = [&](std::vector<std::string> args, const std::string& says) {
    const CommandResult result = cluster.tessel(args);
    CHECK_MESSAGE(result.code == 2, result.err);
    CHECK_MESSAGE(result.err.find(says) != std::string::npos, result.err);
  };
  refused({"logs", "99"}, "no job 99");
  refused({"logs", std::to_string(done), "--rank", "1"}, "launch 1 of job 0 has ranks 0 to 0; there is no rank 1");
  refused({"logs", std::to_string(done), "--launch", "7"}, "job 0 has no launch 7; its launches are 1");
  refused({"logs", std::to_string(big)}, "job 1 has never been launched");
  refused({"logs", std::to_string(done), "--bytes", "0"}, "--bytes must be 1 to 2097152");
  refused({"logs", std::to_string(done), "--bytes", "3000000"}, "--bytes must be 1 to 2097152");

  // Its node gone: where the log is, since nothing can fetch it.
  cluster.kill_agent("a1");
  wait_until([&] { return !cluster.status().at("nodes").at(0).at("connected").get<bool>(); }, 20,
             "the agent is disconnected");
  refused({"logs", std::to_string(done)}, "node a1 is not connected; its log is at " + path + " on that node");
}

TEST_CASE("tessel logs --rank reads the rank's own node") {
  LocalCluster cluster(kFifo);
  cluster.start_serve();
  cluster.add_agent("a1", 1);
  cluster.add_agent("a2", 1);
  cluster.wait_for_nodes(2);
  const CommandResult submitted = cluster.tessel({"submit", "--gpus", "2", "--workdir", cluster.dir().string(), "--",
                                                  "/bin/sh", "-c", "echo this is rank $RANK"});
  REQUIRE_MESSAGE(submitted.code == 0, submitted.err);
  wait_until([&] { return cluster.all_finished(1); }, 30, "the job finishes", [&] { return cluster.diagnostics(); });
  std::map<std::string, std::string> node_of;  // rank -> node, from the journal
  sql::Database database(cluster.db().string(), false);
  auto ranks = database.prepare("SELECT rank, node FROM cluster_ranks ORDER BY rank");
  while (ranks.step()) node_of[std::to_string(ranks.integer(0))] = ranks.text(1);
  REQUIRE(node_of.size() == 2);
  CHECK(node_of["0"] != node_of["1"]);
  for (const std::string rank : {"0", "1"}) {
    const CommandResult log = cluster.tessel({"logs", "0", "--rank", rank});
    REQUIRE_MESSAGE(log.code == 0, log.err);
    CHECK(log.out.find("this is rank " + rank + "\n") != std::string::npos);
    CHECK(log.out.find("this is rank " + std::string(rank == "0" ? "1" : "0")) == std::string::npos);
    const std::string path = (cluster.dir() / ("logs-" + node_of[rank]) / "job-0" / ("rank-" + rank + ".log")).string();
    CHECK_MESSAGE(log.err.find(": " + node_of[rank] + ":" + path + " (") != std::string::npos, log.err);
  }
}

TEST_CASE("a failing job's retries back off; the give-up and tessel jobs show its last error and its log") {
  LocalCluster cluster(std::string(kFifo) + "max_retries = 2\nretry_seconds = 1\nretry_max_seconds = 1.5\n");
  cluster.start_serve();
  cluster.add_agent("a1", 2);
  cluster.wait_for_nodes(1);
  const int id = submit_script(cluster, "echo crashing; exit 3", cluster.dir().string());
  wait_until([&] { return job_row(cluster, id).at("status") == "failed"; }, 30, "the job is given up",
             [&] { return cluster.diagnostics(); });

  // Three attempts, 1 s and then 1.5 s (doubled, capped) apart at least:
  // back to back, each would follow the last exit within a round (0.2 s).
  const fs::path db = cluster.db();
  REQUIRE(count(db, "SELECT count(*) FROM cluster_launches WHERE outcome = 'failed'") == 3);
  sql::Database database(db.string(), false);
  auto rows = database.prepare(
      "SELECT l.decided, max(r.started) FROM cluster_launches l JOIN cluster_ranks r USING (run_id, launch_id) "
      "GROUP BY l.launch_id ORDER BY l.launch_id");
  std::vector<double> decided, started;
  while (rows.step()) decided.push_back(rows.real(0)), started.push_back(rows.real(1));
  REQUIRE(decided.size() == 3);
  CHECK(decided[1] - started[0] >= 1.0 - 0.05);
  CHECK(decided[2] - started[1] >= 1.5 - 0.05);

  const std::string path = (cluster.dir() / "logs-a1" / "job-0" / "rank-0.log").string();
  const std::string error = "launch 3: rank 0 on node a1 exited with code 3; its log: a1:" + path;
  const json row = job_row(cluster, id);
  CHECK(row.at("last_error") == error);
  CHECK(row.at("attempts") == 3);
  CHECK(row.at("nodes") == json::array({"a1"}));  // where it ran, though it has ended
  const std::string log = cluster.serve_log();
  CHECK(log.find("job 0 failed (attempt 1 of 3): launch 1: rank 0 on node a1 exited with code 3") != std::string::npos);
  CHECK(log.find("retrying in 1 s") != std::string::npos);
  CHECK(log.find("retrying in 1.5 s") != std::string::npos);
  CHECK(log.find("job 0 failed 3 times; giving up. Last error: " + error) != std::string::npos);

  // The table: ISO 8601 start and end, the nodes, the error on a line of its own.
  const CommandResult table = cluster.tessel({"jobs"});
  REQUIRE(table.code == 0);
  CHECK(std::regex_search(table.out, std::regex(R"(\n0 .* failed .* 3 +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ +)"
                                                R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ +a1\n)")));
  CHECK(table.out.find("\n       last error: " + error + "\n") != std::string::npos);
  const json listed = json::parse(cluster.tessel({"jobs", "--format", "json"}).out).at(0);
  CHECK(listed.at("last_error") == error);
  CHECK(std::regex_match(listed.at("started_at").get<std::string>(),
                         std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")));
  CHECK(listed.contains("finished_at"));

  // A command that cannot run: its exit code's meaning.
  const int missing = submit_script(cluster, "exec /no/such/program", cluster.dir().string());
  wait_until([&] { return job_row(cluster, missing).at("status") == "failed"; }, 30, "the second job is given up",
             [&] { return cluster.diagnostics(); });
  CHECK(job_row(cluster, missing).at("last_error").get<std::string>().find(
            "exited with code 127 (the command was not found or could not start)") != std::string::npos);
}

TEST_CASE("a daemon restarted during a failed job's back-off keeps the job waiting it out") {
  LocalCluster cluster(std::string(kFifo) + "max_retries = 2\nretry_seconds = 15\n");
  cluster.start_serve();
  cluster.add_agent("a1", 2);
  cluster.wait_for_nodes(1);
  submit_script(cluster, "exit 3", cluster.dir().string());
  const fs::path db = cluster.db();
  wait_until([&] { return count(db, "SELECT count(*) FROM cluster_launches WHERE outcome = 'failed'") == 1; }, 30,
             "the first attempt fails", [&] { return cluster.diagnostics(); });
  const std::string address = cluster.address();
  cluster.kill_serve();
  cluster.start_serve(address);
  // Restarted, the daemon adopts nothing and schedules within seconds: the
  // retry must still wait its 15 s from the failure.
  wait_until([&] { return count(db, "SELECT count(*) FROM cluster_launches") == 2; }, 60, "the retry",
             [&] { return cluster.diagnostics(); });
  sql::Database database(db.string(), false);
  auto rows = database.prepare("SELECT ended FROM cluster_launches WHERE launch_id = 1");
  REQUIRE(rows.step());
  const double failed_at = rows.real(0);
  auto retry = database.prepare("SELECT decided FROM cluster_launches WHERE launch_id = 2");
  REQUIRE(retry.step());
  CHECK(retry.real(0) - failed_at >= 15 - 0.05);
}

TEST_CASE("a working directory missing on the node fails the launch with that error in tessel jobs") {
  LocalCluster cluster(std::string(kFifo) + "max_retries = 0\n");
  cluster.start_serve();
  cluster.add_agent("a1", 1);
  cluster.wait_for_nodes(1);
  const std::string nowhere = (cluster.dir() / "no-such-dir").string();
  const int id = submit_script(cluster, "echo should not run", nowhere);
  wait_until([&] { return job_row(cluster, id).at("status") == "failed"; }, 30, "the job fails",
             [&] { return cluster.diagnostics(); });
  const std::string error = job_row(cluster, id).at("last_error").get<std::string>();
  CHECK_MESSAGE(error.find("rank 0 on node a1 could not start: working directory '" + nowhere +
                           "' does not exist on node a1; its log: a1:") != std::string::npos, error);
  CHECK(cluster.serve_log().find("giving up. Last error: launch 1: rank 0 on node a1 could not start: working "
                                 "directory") != std::string::npos);
  const CommandResult log = cluster.tessel({"logs", std::to_string(id)});
  CHECK(log.out.find("cannot launch: working directory '" + nowhere + "' does not exist") != std::string::npos);
  CHECK(log.out.find("should not run") == std::string::npos);
}

TEST_CASE("progress a preempted job reports during its grace period is kept") {
  // newest_first preempts the running job for each newer one.
  LocalCluster cluster("[scheduler]\nround_seconds = 0.2\n"
                       "allocation = { plugin = \"newest_first\", path = \"" +
                       test_plugin("newest_first").string() +
                       "\" }\nplacement = { plugin = \"consolidated\" }\n"
                       "[serve]\nheartbeat_seconds = 0.2\nnode_timeout_seconds = 5\ngrace_seconds = 5\n");
  cluster.start_serve();
  cluster.add_agent("a1", 1);
  cluster.wait_for_nodes(1);
  // At iteration 5 until told to stop; then it checkpoints at 77, says so,
  // and takes a while to exit, as a job saving its state would.
  const int first = submit_script(
      cluster,
      "echo 'iteration 5 of 1000' >> \"$TESSEL_PROGRESS\"; "
      "trap 'echo \"iteration 77 of 1000\" >> \"$TESSEL_PROGRESS\"; sleep 1; exit 0' TERM; "
      "while :; do sleep 0.05; done",
      cluster.dir().string());
  wait_until([&] { return job_row(cluster, first).at("iteration") == 5; }, 20, "the first job reports progress",
             [&] { return cluster.diagnostics(); });
  const int second = submit_script(cluster, "sleep 600", cluster.dir().string());
  wait_until([&] { return job_row(cluster, second).at("status") == "running"; }, 30, "the newer job runs",
             [&] { return cluster.diagnostics(); });
  const json row = job_row(cluster, first);
  CHECK(row.at("status") == "preempted");
  CHECK(row.at("iteration") == 77);
  CHECK(count(cluster.db(), "SELECT count(*) FROM cluster_launches WHERE launch_id = 1 AND outcome = 'preempted' "
                            "AND ended IS NOT NULL") == 1);
  CHECK(count(cluster.db(), "SELECT count(*) FROM jobs WHERE job_id = 0 AND executed_work = 77") == 1);
}

TEST_CASE("serve and agent log lines, their errors included, carry ISO 8601 UTC times") {
  LocalCluster cluster(kFifo);
  cluster.start_serve();
  cluster.add_agent("a1", 1);
  cluster.wait_for_nodes(1);
  CHECK(cluster.submit({1, 5}) == 0);
  wait_until([&] { return cluster.all_finished(1); }, 30, "the job finishes", [&] { return cluster.diagnostics(); });
  // A second daemon on the same database is refused once it has started serving.
  const CommandResult second = run_tessel({"serve", (cluster.dir() / "serve.toml").string(), "--listen", "127.0.0.1:0",
                                           "--secret-file", (cluster.dir() / "secret").string()},
                                          cluster.dir());
  CHECK(second.code == 2);
  CHECK_MESSAGE(std::regex_search(second.err, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z tessel serve: )"
                                                         R"(.*another tessel serve is using this database)")),
                second.err);
  for (const fs::path& file : {cluster.dir() / "serve.err", cluster.dir() / "a1.err"}) {
    std::istringstream text(slurp(file));
    int lines = 0;
    for (std::string line; std::getline(text, line); ++lines) CHECK_MESSAGE(std::regex_match(line, kIsoLogLine), line);
    CHECK(lines > 0);
  }
}

TEST_CASE("[serve] retry_seconds and retry_max_seconds are checked") {
  TempDir dir;
  const auto refused = [&](const std::string& serve, const std::string& says) {
    const fs::path config = dir.write("serve.toml", "[serve]\nsecret_file = \"secret\"\n" + serve);
    const CommandResult result = run_tessel({"serve", config.string(), "--listen", "127.0.0.1:0"}, dir.path());
    CHECK(result.code == 2);
    CHECK_MESSAGE(result.err.find(says) != std::string::npos, result.err);
  };
  refused("retry_seconds = 10\nretry_max_seconds = 5\n",
          "'retry_max_seconds' in [serve] must be at least 'retry_seconds'");
  refused("retry_seconds = -1\n", "retry_seconds");
}
