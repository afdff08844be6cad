// Real distributed training's faults on real nodes: what a torch.distributed
// job met when run by hand (a node crash, a frozen agent, a daemon restart, a
// rank hanging in its exit), replayed with `tessel serve` and `tessel agent`
// processes on loopback (local_cluster.hpp) and small shell jobs that behave
// as such a job's ranks do. tests/python/test_torch_training.py runs the
// PyTorch example itself.
#include <doctest/doctest.h>

#include <signal.h>

#include <fstream>
#include <regex>
#include <string>

#include "local_cluster.hpp"
#include "results/sqlite.hpp"
#include "results/store.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

const char* kSettings = R"([scheduler]
round_seconds = 0.5
allocation = { plugin = "fifo", backfill = true }
placement = { plugin = "consolidated" }
[serve]
heartbeat_seconds = 0.2
)";

// Submits `script` (run by /bin/sh) as a job in its own working directory
// under the cluster's; returns the job's id and that directory.
std::pair<int, fs::path> submit_script(LocalCluster& cluster, const std::string& name, int gpus, double grace,
                                       const std::string& script, const std::vector<std::string>& extra = {}) {
  const fs::path workdir = cluster.dir() / "work" / name;
  fs::create_directories(workdir);
  std::vector<std::string> args{"submit", "--name", name, "--gpus", std::to_string(gpus), "--grace-seconds",
                                std::to_string(grace), "--workdir", workdir.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  args.insert(args.end(), {"--", "/bin/sh", "-c", script});
  const CommandResult result = cluster.tessel(args);
  REQUIRE_MESSAGE(result.code == 0, result.err);
  std::smatch match;
  REQUIRE(std::regex_search(result.out, match, std::regex("submitted job ([0-9]+)")));
  return {std::stoi(match[1]), workdir};
}

std::int64_t attempts(LocalCluster& cluster, int job) { return cluster.jobs().at(job).at("attempts"); }

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

void touch(const fs::path& file) { std::ofstream(file).close(); }

// Starts the daemon and one agent per (name, GPUs); returns once all have registered.
void start(LocalCluster& cluster, const std::vector<std::pair<std::string, int>>& agents) {
  cluster.start_serve();
  for (const auto& [name, gpus] : agents) cluster.add_agent(name, gpus);
  cluster.wait_for_nodes(agents.size());
}

}  // namespace

TEST_CASE("a node crash (kill -9 on an agent) is lost, not a failed attempt, though the other ranks fail on it") {
  // A long node timeout: the crashed agent is restarted before its node is
  // down, as a supervisor would, and reports that it runs nothing.
  LocalCluster cluster(std::string(kSettings) + "node_timeout_seconds = 30\ngrace_seconds = 1\nmax_retries = 0\n");
  start(cluster, {{"a1", 1}, {"a2", 1}});
  // Rank 0 fails once its peer is gone, as a gloo rank does when its peer's
  // socket closes; resumed, the job ends well.
  const auto [job, workdir] = submit_script(cluster, "crash", 2, 1,
                                            "[ -n \"$TESSEL_RESUME\" ] && exit 0; "
                                            "if [ \"$RANK\" = 0 ]; then while [ ! -f peer-gone ]; do sleep 0.05; done; "
                                            "echo peer gone; exit 1; fi; exec sleep 1000");
  std::string peer_node;
  wait_until([&] {
    if (count(cluster.db(), "SELECT count(*) FROM cluster_ranks WHERE pid IS NOT NULL") < 2) return false;
    sql::Database database(cluster.db().string(), false);
    auto node = database.prepare("SELECT node FROM cluster_ranks WHERE launch_id = 1 AND rank = 1");
    if (node.step()) peer_node = node.text(0);
    return true;
  }, 30, "both ranks run", [&] { return cluster.diagnostics(); });
  cluster.kill_agent(peer_node);
  touch(workdir / "peer-gone");
  wait_until([&] {
    return count(cluster.db(), "SELECT count(*) FROM cluster_ranks WHERE launch_id = 1 AND rank = 0 AND exit_code = 1") == 1;
  }, 30, "rank 0 failed", [&] { return cluster.diagnostics(); });
  cluster.add_agent(peer_node, 1);
  wait_until([&] { return cluster.all_finished(1); }, 60, "the job finished", [&] { return cluster.diagnostics(); });

  const fs::path db = cluster.db();
  CHECK(count(db, "SELECT count(*) FROM cluster_launches WHERE launch_id = 1 AND outcome = 'lost'") == 1);
  CHECK(count(db, "SELECT count(*) FROM cluster_launches WHERE job_id = 0 AND outcome = 'finished'") == 1);
  CHECK(attempts(cluster, job) == 1);
  CHECK(cluster.serve_log().find("died with its agent; counted as lost") != std::string::npos);
  CHECK(cluster.serve_log().find("node " + peer_node + " is down") == std::string::npos);
}

TEST_CASE("a job whose node dies under it launch after launch counts as failing, past max_retries + 1 crashes") {
  LocalCluster cluster(std::string(kSettings) + "node_timeout_seconds = 30\ngrace_seconds = 1\nmax_retries = 0\n");
  start(cluster, {{"a1", 1}, {"a2", 1}});
  // Every launch: rank 0 fails once its peer's node is gone, as it would if
  // the job itself took that node down.
  const auto [job, workdir] = submit_script(cluster, "crasher", 2, 1,
                                            "if [ \"$RANK\" = 0 ]; then while [ ! -f peer-gone ]; do sleep 0.05; done; "
                                            "rm -f peer-gone; exit 1; fi; exec sleep 1000");
  for (int launch = 1; launch <= 2; ++launch) {
    std::string peer_node;
    wait_until([&] {
      sql::Database database(cluster.db().string(), false);
      auto node = database.prepare("SELECT node FROM cluster_ranks WHERE launch_id = ? AND rank = 1 AND pid IS NOT NULL");
      node.bind(1, static_cast<std::int64_t>(launch));
      if (node.step()) peer_node = node.text(0);
      return !peer_node.empty() &&
             count(cluster.db(), "SELECT count(*) FROM cluster_ranks WHERE launch_id = " + std::to_string(launch) +
                                     " AND pid IS NOT NULL") == 2;
    }, 30, "both ranks of launch " + std::to_string(launch) + " run", [&] { return cluster.diagnostics(); });
    cluster.kill_agent(peer_node);
    touch(workdir / "peer-gone");
    wait_until([&] {
      return count(cluster.db(), "SELECT count(*) FROM cluster_ranks WHERE launch_id = " + std::to_string(launch) +
                                     " AND rank = 0 AND exit_code = 1") == 1;
    }, 30, "rank 0 of launch " + std::to_string(launch) + " failed", [&] { return cluster.diagnostics(); });
    // Restarted, the agent reports that it runs nothing: the launch ends.
    cluster.add_agent(peer_node, 1);
    wait_until([&] {
      return count(cluster.db(), "SELECT count(*) FROM cluster_launches WHERE launch_id = " + std::to_string(launch) +
                                     " AND ended IS NOT NULL") == 1;
    }, 30, "launch " + std::to_string(launch) + " ended", [&] { return cluster.diagnostics(); });
  }
  const fs::path db = cluster.db();
  CHECK(count(db, "SELECT count(*) FROM cluster_launches WHERE launch_id = 1 AND outcome = 'lost'") == 1);
  CHECK(count(db, "SELECT count(*) FROM cluster_launches WHERE launch_id = 2 AND outcome = 'failed'") == 1);
  CHECK(count(db, "SELECT count(*) FROM jobs WHERE status = 'failed'") == 1);
  CHECK(cluster.serve_log().find("counted as a failed attempt: the job may be what takes its nodes down") !=
        std::string::npos);
}

TEST_CASE("an agent frozen past its node timeout (SIGSTOP) re-registers once when it wakes, then stops its stale job") {
  LocalCluster cluster(std::string(kSettings) + "node_timeout_seconds = 1\ngrace_seconds = 1\n");
  start(cluster, {{"a1", 1}});
  // Ignores SIGTERM, so that it still runs when its agent comes back and
  // re-registers; SIGKILL ends it a grace period after the stop.
  const auto job = submit_script(cluster, "frozen", 1, 6,
                                 "[ -n \"$TESSEL_RESUME\" ] && exit 0; trap '' TERM; exec sleep 1000").first;
  wait_until([&] { return count(cluster.db(), "SELECT count(*) FROM cluster_ranks WHERE pid IS NOT NULL") == 1; }, 30,
             "the job runs", [&] { return cluster.diagnostics(); });
  const pid_t agent = cluster.agent_pid("a1");
  ::kill(agent, SIGSTOP);
  wait_until([&] { return cluster.serve_log().find("node a1 is down") != std::string::npos; }, 30, "a1 is down",
             [&] { return cluster.diagnostics(); });
  ::kill(agent, SIGCONT);
  wait_until([&] { return cluster.serve_log().find("node a1 is back") != std::string::npos; }, 30, "a1 is back",
             [&] { return cluster.diagnostics(); });
  wait_until([&] { return cluster.all_finished(1); }, 60, "the job finished", [&] { return cluster.diagnostics(); });

  const std::string agent_log = slurp(cluster.dir() / "a1.err");
  CHECK_MESSAGE(agent_log.find("expected 'registered'") == std::string::npos, agent_log);
  CHECK_MESSAGE(occurrences(agent_log, "registered a1 with") == 2, agent_log);
  CHECK(occurrences(cluster.serve_log(), "node a1 is back") == 1);
  const fs::path db = cluster.db();
  CHECK(count(db, "SELECT count(*) FROM cluster_launches WHERE launch_id = 1 AND outcome = 'lost'") == 1);
  // The stale process outlived the stop's SIGTERM and was killed.
  CHECK(count(db, "SELECT count(*) FROM cluster_ranks WHERE launch_id = 1 AND signal = 9") == 1);
  CHECK(attempts(cluster, job) == 1);
}

TEST_CASE("a daemon restarted under a running job gives the next job on that node another MASTER_PORT") {
  LocalCluster cluster(std::string(kSettings) + "node_timeout_seconds = 8\ngrace_seconds = 1\n");
  start(cluster, {{"a1", 2}});
  const std::string script = "echo port=$MASTER_PORT; while [ ! -f done ]; do sleep 0.05; done";
  auto port_of = [&](int job) {
    std::smatch match;
    for (const fs::path& file : cluster.logs(job)) {
      const std::string text = slurp(file);
      if (std::regex_search(text, match, std::regex("port=([0-9]+)"))) return std::stoi(match[1]);
    }
    return 0;
  };
  const auto [first, first_dir] = submit_script(cluster, "first", 1, 1, script);
  wait_until([&] { return port_of(first) != 0; }, 30, "the first job runs", [&] { return cluster.diagnostics(); });
  const std::string address = cluster.address();
  cluster.kill_serve();
  cluster.start_serve(address);
  wait_until([&] { return cluster.serve_log().find("adopted") != std::string::npos; }, 30, "the first job is adopted",
             [&] { return cluster.diagnostics(); });
  const auto [second, second_dir] = submit_script(cluster, "second", 1, 1, script);
  wait_until([&] { return port_of(second) != 0; }, 30, "the second job runs", [&] { return cluster.diagnostics(); });

  CHECK(port_of(first) != port_of(second));
  const fs::path db = cluster.db();
  CHECK(count(db, "SELECT master_port FROM cluster_launches WHERE job_id = " + std::to_string(first)) == port_of(first));
  CHECK(count(db, "SELECT master_port FROM cluster_launches WHERE job_id = " + std::to_string(second)) ==
        port_of(second));
  touch(first_dir / "done");
  touch(second_dir / "done");
  wait_until([&] { return cluster.all_finished(2); }, 30, "both jobs finished", [&] { return cluster.diagnostics(); });
}

TEST_CASE("a job whose rank 0 finished its training while another rank hangs in its exit finishes in bounded time") {
  LocalCluster cluster(std::string(kSettings) + "node_timeout_seconds = 5\ngrace_seconds = 1\n");
  start(cluster, {{"a1", 2}});
  // Rank 0 exits once its last progress line has reached the daemon (so the
  // exit report must repeat it); rank 1 hangs in its exit and ignores
  // SIGTERM: only SIGKILL ends it.
  const auto [hung, workdir] = submit_script(
      cluster, "hung", 2, 1,
      "if [ \"$RANK\" = 0 ]; then echo 'iteration 5 of 5' >> \"$TESSEL_PROGRESS\"; "
      "while [ ! -f exit-now ]; do sleep 0.05; done; exit 0; fi; trap '' TERM; exec sleep 1000",
      {"--iterations", "5"});
  // The next job waits for the GPUs the hung rank holds.
  const int next = submit_script(cluster, "next", 2, 1, "exit 0").first;
  wait_until([&] { return cluster.jobs().at(hung).at("iteration") == 5; }, 30, "the daemon has the progress",
             [&] { return cluster.diagnostics(); });
  touch(workdir / "exit-now");
  wait_until([&] { return cluster.all_finished(2); }, 60, "both jobs finished", [&] { return cluster.diagnostics(); });

  const fs::path db = cluster.db();
  const std::string of_hung = " FROM cluster_launches WHERE job_id = " + std::to_string(hung);
  CHECK(count(db, "SELECT count(*)" + of_hung) == 1);
  CHECK(count(db, "SELECT count(*)" + of_hung + " AND outcome = 'finished'") == 1);
  CHECK(count(db, "SELECT count(*) FROM cluster_ranks r JOIN cluster_launches l USING (run_id, launch_id) WHERE l.job_id = " +
                      std::to_string(hung) + " AND r.rank = 1 AND r.signal = 9") == 1);
  CHECK(attempts(cluster, hung) == 1);
  CHECK(cluster.serve_log().find("did not exit within") != std::string::npos);
  // The GPUs went to the next job only once the hung rank was gone.
  CHECK(count(db, "SELECT count(*) FROM cluster_ranks r JOIN cluster_launches l USING (run_id, launch_id) "
                  "WHERE l.job_id = " + std::to_string(next) + " AND r.started < (SELECT ended" + of_hung + ")") == 0);
}

TEST_CASE("a daemon restarted while a finished training's last rank hangs adopts the launch and still ends it") {
  LocalCluster cluster(std::string(kSettings) + "node_timeout_seconds = 8\ngrace_seconds = 1\n");
  start(cluster, {{"a1", 2}});
  // A window long enough to restart the daemon within it.
  const int job = submit_script(cluster, "hung", 2, 15,
                                "if [ \"$RANK\" = 0 ]; then echo 'iteration 5 of 5' >> \"$TESSEL_PROGRESS\"; exit 0; fi; "
                                "exec sleep 1000",
                                {"--iterations", "5"}).first;
  const fs::path db = cluster.db();
  wait_until([&] {
    return count(db, "SELECT count(*) FROM cluster_ranks WHERE rank = 0 AND exit_code = 0") == 1 &&
           count(db, "SELECT count(*) FROM jobs WHERE executed_work = 5") == 1;
  }, 30, "rank 0's exit and the job's progress are saved", [&] { return cluster.diagnostics(); });
  const std::string address = cluster.address();
  cluster.kill_serve();
  cluster.start_serve(address);
  wait_until([&] { return cluster.all_finished(1); }, 60, "the job finished", [&] { return cluster.diagnostics(); });

  CHECK(cluster.serve_log().find("adopted") != std::string::npos);
  CHECK(cluster.serve_log().find("did not exit within") != std::string::npos);
  CHECK(count(db, "SELECT count(*) FROM cluster_launches WHERE job_id = " + std::to_string(job)) == 1);
  CHECK(count(db, "SELECT count(*) FROM cluster_launches WHERE outcome = 'finished'") == 1);
  CHECK(count(db, "SELECT count(*) FROM cluster_ranks WHERE rank = 1 AND signal = 15") == 1);
}

TEST_CASE("a daemon resuming a schema-6 database adds master_port and adopts the launches it finds") {
  LocalCluster cluster(std::string(kSettings) + "node_timeout_seconds = 8\ngrace_seconds = 1\n");
  start(cluster, {{"a1", 1}});
  const auto [job, workdir] = submit_script(cluster, "old", 1, 1, "while [ ! -f done ]; do sleep 0.05; done");
  const fs::path db = cluster.db();
  wait_until([&] { return count(db, "SELECT count(*) FROM cluster_ranks WHERE pid IS NOT NULL") == 1; }, 30,
             "the job runs", [&] { return cluster.diagnostics(); });
  const std::string address = cluster.address();
  cluster.kill_serve();
  {
    // As a schema-6 tessel left it: no ports, no space sharing.
    sql::Database raw(db.string(), false);
    raw.exec("ALTER TABLE cluster_launches DROP COLUMN master_port; ALTER TABLE samples DROP COLUMN shared_gpus; "
             "ALTER TABLE jobs DROP COLUMN shared_seconds; PRAGMA user_version = 6");
  }
  cluster.start_serve(address);
  wait_until([&] { return cluster.serve_log().find("adopted") != std::string::npos; }, 30, "the job is adopted",
             [&] { return cluster.diagnostics(); });
  CHECK(count(db, "PRAGMA user_version") == kSchemaVersion);
  CHECK(count(db, "SELECT count(*) FROM cluster_launches WHERE master_port IS NULL") == 1);
  touch(workdir / "done");
  wait_until([&] { return cluster.all_finished(1); }, 30, "the job finished", [&] { return cluster.diagnostics(); });
  CHECK(count(db, "SELECT count(*) FROM cluster_launches WHERE job_id = " + std::to_string(job)) == 1);
}

TEST_CASE("a job preempted after its last iteration, on stale progress, finishes instead of launching again") {
  LocalCluster cluster(R"([scheduler]
round_seconds = 0.5
allocation = { plugin = "srtf" }
placement = { plugin = "consolidated" }
[serve]
heartbeat_seconds = 0.2
)");
  start(cluster, {{"a1", 1}});
  // Its progress says 1 of 100 until it is stopped; then, as a job caught
  // in its exit after its last iteration, it says 100 and ends on the TERM.
  const auto [done, workdir] = submit_script(
      cluster, "done", 1, 5,
      "trap 'echo \"iteration 100 of 100\" >> \"$TESSEL_PROGRESS\"; exit 143' TERM; "
      "echo 'iteration 1 of 100' >> \"$TESSEL_PROGRESS\"; while :; do sleep 0.05; done",
      {"--iterations", "100"});
  wait_until([&] { return cluster.jobs().at(done).at("iteration") == 1; }, 30, "the daemon has the progress",
             [&] { return cluster.diagnostics(); });
  // Shorter by the stale progress: SRTF preempts the first job for it.
  const int shorter = submit_script(cluster, "shorter", 1, 1, "exit 0", {"--iterations", "10"}).first;
  wait_until([&] { return cluster.all_finished(2); }, 60, "both jobs finished", [&] { return cluster.diagnostics(); });

  const fs::path db = cluster.db();
  const std::string of_done = " FROM cluster_launches WHERE job_id = " + std::to_string(done);
  CHECK(count(db, "SELECT count(*)" + of_done) == 1);  // no launch only to resume at the end
  CHECK(count(db, "SELECT count(*)" + of_done + " AND outcome = 'finished'") == 1);
  CHECK(cluster.jobs().at(done).at("preemptions") == 1);
  CHECK(cluster.jobs().at(shorter).at("status") == "finished");
  CHECK(cluster.serve_log().find("had done its last iteration when preempted") != std::string::npos);
}
