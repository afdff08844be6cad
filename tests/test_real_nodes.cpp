// Real nodes, end to end: `tessel serve` and `tessel agent` processes on
// loopback (local_cluster.hpp), running the example `train` job.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "auth.hpp"
#include "client.hpp"
#include "frame.hpp"
#include "job_request.hpp"
#include "local_cluster.hpp"
#include "results/sqlite.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::cluster;
using namespace tessel::test;

namespace {

// One launch's part of a rank log: from tessel's "launch" line to the next.
struct Segment {
  double started = 0;
  std::vector<std::string> lines;
};

std::vector<Segment> segments(const std::vector<fs::path>& files) {
  std::vector<Segment> all;
  const std::regex launch_line("^tessel: ([0-9.]+) launch ");
  for (const fs::path& file : files) {
    std::istringstream text(slurp(file));
    for (std::string line; std::getline(text, line);) {
      std::smatch match;
      if (std::regex_search(line, match, launch_line)) all.push_back({std::stod(match[1]), {}});
      if (!all.empty()) all.back().lines.push_back(line);
    }
  }
  std::sort(all.begin(), all.end(), [](const Segment& a, const Segment& b) { return a.started < b.started; });
  return all;
}

// Start and end times of each process in the logs of one rank; an
// unterminated interval ends at +infinity.
std::vector<std::pair<double, double>> process_lifetimes(const std::vector<fs::path>& files) {
  std::vector<std::pair<double, double>> lifetimes;
  const std::regex started("^tessel: ([0-9.]+) started pid ([0-9]+)");
  const std::regex ended("^tessel: ([0-9.]+) pid ([0-9]+) (exited|killed)");
  for (const Segment& segment : segments(files)) {
    std::pair<double, double> life{-1, std::numeric_limits<double>::infinity()};
    for (const std::string& line : segment.lines) {
      std::smatch match;
      if (std::regex_search(line, match, started)) life.first = std::stod(match[1]);
      if (std::regex_search(line, match, ended)) life.second = std::stod(match[1]);
    }
    if (life.first >= 0) lifetimes.push_back(life);
  }
  return lifetimes;
}

// For each GPU, the time spans in which some launch's processes ran there;
// true if two launches ever overlapped on one GPU.
bool gpus_shared_at_once(const std::vector<fs::path>& files) {
  const std::regex launch_line(R"(^tessel: ([0-9.]+) launch ([0-9]+) rank [0-9]+ of [0-9]+ on (\S+), GPUs \[([0-9,]*)\])");
  const std::regex ended("^tessel: ([0-9.]+) pid [0-9]+ (exited|killed)");
  // (node, gpu) -> launch -> [first start, last end]
  std::map<std::pair<std::string, int>, std::map<int, std::pair<double, double>>> spans;
  for (const fs::path& file : files) {
    std::istringstream text(slurp(file));
    std::vector<std::pair<std::string, int>> gpus;
    int launch = -1;
    double start = 0;
    for (std::string line; std::getline(text, line);) {
      std::smatch match;
      if (std::regex_search(line, match, launch_line)) {
        start = std::stod(match[1]);
        launch = std::stoi(match[2]);
        gpus.clear();
        std::stringstream list(match[4].str());
        for (std::string gpu; std::getline(list, gpu, ',');) gpus.push_back({match[3].str(), std::stoi(gpu)});
      } else if (launch >= 0 && std::regex_search(line, match, ended)) {
        const double end = std::stod(match[1]);
        for (const auto& gpu : gpus) {
          auto [it, fresh] = spans[gpu].try_emplace(launch, start, end);
          if (!fresh) it->second = {std::min(it->second.first, start), std::max(it->second.second, end)};
        }
        launch = -1;
      }
    }
  }
  for (auto& [gpu, launches] : spans) {
    std::vector<std::pair<double, double>> sorted;
    for (auto& [launch, span] : launches) sorted.push_back(span);
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 1; i < sorted.size(); ++i)
      if (sorted[i].first < sorted[i - 1].second) return true;
  }
  return false;
}

bool any_log_says(const LocalCluster& cluster, int jobs, const std::string& text) {
  for (int job = 0; job < jobs; ++job)
    for (const fs::path& file : cluster.logs(job))
      if (slurp(file).find(text) != std::string::npos) return true;
  return false;
}

const char* kFifo = R"([scheduler]
round_seconds = 0.5
allocation = { plugin = "fifo", backfill = true }
placement = { plugin = "consolidated" }
[serve]
heartbeat_seconds = 0.2
)";

}  // namespace

TEST_CASE("twenty jobs on three agents all finish, and report reads the live run") {
  LocalCluster cluster(std::string(kFifo) + "node_timeout_seconds = 5\ngrace_seconds = 2\n");
  cluster.start_serve();
  for (const char* name : {"a1", "a2", "a3"}) cluster.add_agent(name);
  cluster.wait_for_nodes(3);
  std::vector<int> iterations;
  for (int i = 0; i < 20; ++i) {
    iterations.push_back(50 + (i * 37) % 101);  // 1 to 3 s at 20 ms an iteration
    CHECK(cluster.submit({1 + i % 3, iterations.back()}) == i);
  }
  wait_until([&] { return cluster.all_finished(20); }, 90, "all 20 jobs finished", [&] { return cluster.diagnostics(); });

  const fs::path db = cluster.db();
  CHECK(count(db, "SELECT count(*) FROM runs WHERE mode = 'cluster'") == 1);
  CHECK(count(db, "SELECT count(*) FROM jobs WHERE status = 'finished' AND executed_work = total_work") == 20);
  // Plausible JCTs: at least the job's own run time, started after arrival.
  sql::Database database(db.string(), false);
  auto rows = database.prepare("SELECT job_id, arrival, first_start, finish FROM jobs ORDER BY job_id");
  while (rows.step()) {
    const double arrival = rows.real(1), start = rows.real(2), finish = rows.real(3);
    const int id = static_cast<int>(rows.integer(0));
    CHECK(start >= arrival);
    CHECK(finish - start >= iterations[id] * 0.02);
    CHECK(finish - arrival < 60);
  }
  CHECK(count(db, "SELECT count(*) FROM cluster_launches WHERE outcome = 'finished'") == 20);
  CHECK(count(db, "SELECT count(DISTINCT job_id) FROM decisions WHERE code = 'place' AND plugin = 'consolidated'") == 20);
  CHECK(count(db, "SELECT count(*) FROM samples") > 2);
  CHECK(count(db, "SELECT count(*) FROM cluster_ranks WHERE exit_code = 0") ==
        count(db, "SELECT sum(gpus) FROM jobs"));  // one process per GPU

  const CommandResult report = run_tessel({"report", db.string(), "--format", "csv"});
  REQUIRE(report.code == 0);
  // The first run's figures, by column name.
  std::istringstream csv(report.out);
  std::string header, row;
  std::getline(csv, header);
  std::getline(csv, row);
  auto cells = [](const std::string& line) {
    std::vector<std::string> out;
    std::stringstream in(line);
    for (std::string cell; std::getline(in, cell, ',');) out.push_back(cell);
    return out;
  };
  const std::vector<std::string> names = cells(header), values = cells(row);
  REQUIRE(names.size() == values.size());
  std::map<std::string, std::string> figure;
  for (std::size_t i = 0; i < names.size(); ++i) figure[names[i]] = values[i];
  CAPTURE(header);
  CHECK(figure["status"] == "running");
  CHECK(figure["jobs"] == "20");
  CHECK(figure["finished"] == "20");
  CHECK(std::stod(figure["avg_jct_s"]) > 1.0);  // seconds
  CHECK(std::stod(figure["avg_jct_s"]) < 60.0);
  CHECK(std::stod(figure["gpu_utilization"]) > 0.0);
  const CommandResult table = run_tessel({"report", db.string()});
  CHECK(table.out.find("is a cluster run, running: figures cover 20 finished of 20 jobs so far") != std::string::npos);
  CHECK(table.out.find("it has no results") == std::string::npos);

  // `tessel jobs` shows each finished job's attempts, when it started and
  // ended (ISO 8601 UTC), and where it ran.
  const CommandResult jobs = cluster.tessel({"jobs"});
  REQUIRE(jobs.code == 0);
  CHECK(jobs.out.find("ATTEMPTS") != std::string::npos);
  const std::regex finished_row(
      R"(\n\d+ +\S+ +\S+ +finished +\d+ +(\d+) of \1 +0 +1 +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ +a[1-3])");
  const auto finished_rows = std::distance(std::sregex_iterator(jobs.out.begin(), jobs.out.end(), finished_row), {});
  CHECK_MESSAGE(finished_rows == 20, jobs.out);

  // The environment each process got: the agent's, plus tessel's.
  const std::string log = slurp(cluster.logs(0, 0).at(0));
  CHECK(log.find("launch 1 rank 0 of 1") != std::string::npos);
}

TEST_CASE("a preemptive policy preempts and resumes jobs without losing more than a checkpoint interval") {
  // newest_first is a test policy; swap in `las` once it lands on main.
  LocalCluster cluster("[scheduler]\nround_seconds = 1\n"
                       "allocation = { plugin = \"newest_first\", path = \"" +
                       test_plugin("newest_first").string() +
                       "\" }\nplacement = { plugin = \"consolidated\" }\n"
                       "[serve]\nheartbeat_seconds = 0.2\nnode_timeout_seconds = 5\ngrace_seconds = 2\n");
  cluster.start_serve();
  for (const char* name : {"a1", "a2", "a3"}) cluster.add_agent(name);
  cluster.wait_for_nodes(3);
  constexpr int kJobs = 6;
  constexpr int kCheckpointEvery = 10;
  constexpr int kIterations = 250;  // 5 s: the older jobs still run when the next ones arrive
  for (int i = 0; i < kJobs; ++i) {
    // Stopping takes 300 ms (a slow checkpoint): the GPUs must wait for it.
    cluster.submit({4, kIterations}, kCheckpointEvery, 300);
    // The next job arrives once this one runs: more demand than GPUs, and
    // every arrival after the third preempts someone.
    wait_until([&] { return cluster.jobs().at(i).at("status") == "running"; }, 20, "job runs");
  }
  wait_until([&] { return cluster.all_finished(kJobs); }, 90, "all jobs finished", [&] { return cluster.diagnostics(); });

  const fs::path db = cluster.db();
  CHECK(count(db, "SELECT count(*) FROM jobs WHERE status = 'finished' AND executed_work = " +
              std::to_string(kIterations)) == kJobs);
  CHECK(count(db, "SELECT sum(preemptions) FROM jobs") >= 3);
  CHECK(count(db, "SELECT count(*) FROM cluster_launches WHERE outcome = 'preempted'") ==
        count(db, "SELECT sum(preemptions) FROM jobs"));
  CHECK(count(db, "SELECT count(*) FROM cluster_launches WHERE resume = 1") >= 3);

  int resumes = 0;
  for (int job = 0; job < kJobs; ++job) {
    const std::vector<Segment> launches = segments(cluster.logs(job, 0));
    REQUIRE(!launches.empty());
    int reached = 0;
    for (std::size_t i = 0; i < launches.size(); ++i) {
      int resumed_from = -1, last = -1;
      for (const std::string& line : launches[i].lines) {
        std::smatch match;
        if (std::regex_search(line, match, std::regex("resuming from iteration ([0-9]+)"))) resumed_from = std::stoi(match[1]);
        if (std::regex_search(line, match, std::regex("starting at iteration 0"))) resumed_from = 0;
        if (std::regex_search(line, match, std::regex("^train: iteration ([0-9]+)"))) last = std::stoi(match[1]);
      }
      INFO("job " << job << " launch " << i);
      REQUIRE(resumed_from >= 0);
      if (i > 0) {
        CHECK(launches[i].lines.front().find(", resumed") != std::string::npos);  // TESSEL_RESUME=1
        CHECK(resumed_from <= reached);
        CHECK(reached - resumed_from <= kCheckpointEvery);
        ++resumes;
      }
      reached = std::max(reached, std::max(last, resumed_from));
    }
    bool done = false;
    const std::string finished = "done " + std::to_string(kIterations) + " of " + std::to_string(kIterations);
    for (const fs::path& file : cluster.logs(job, 0)) done = done || slurp(file).find(finished) != std::string::npos;
    CHECK(done);
  }
  CHECK(resumes >= 3);
  CHECK_FALSE(any_log_says(cluster, kJobs, "DUPLICATE"));
  CHECK_FALSE(gpus_shared_at_once(cluster.all_logs()));
}

TEST_CASE("a killed agent's jobs are requeued and finish elsewhere; its processes die with it") {
  LocalCluster cluster(std::string(kFifo) + "node_timeout_seconds = 1\ngrace_seconds = 0.5\n");
  cluster.start_serve();
  for (const char* name : {"a1", "a2", "a3"}) cluster.add_agent(name);
  cluster.wait_for_nodes(3);
  constexpr int kJobs = 12;
  for (int i = 0; i < kJobs; ++i) cluster.submit({1 + i % 2, 150});
  wait_until([&] {
    for (const json& job : cluster.jobs())
      if (job.at("status") == "running" && job.at("nodes").size() == 1 && job.at("nodes").at(0) == "a1" &&
          job.at("iteration").get<double>() > 10)
        return true;
    return false;
  }, 30, "a job makes progress on a1");
  // The processes a1 was running die with it (PR_SET_PDEATHSIG), long before
  // they would have finished on their own.
  std::vector<pid_t> orphans;
  {
    sql::Database database(cluster.db().string(), false);
    auto pids = database.prepare("SELECT pid FROM cluster_ranks WHERE node = 'a1' AND pid IS NOT NULL AND exit_code IS NULL");
    while (pids.step()) orphans.push_back(static_cast<pid_t>(pids.integer(0)));
  }
  cluster.kill_agent("a1");
  wait_until([&] {
    return std::none_of(orphans.begin(), orphans.end(), process_alive);
  }, 1.0, "a1's job processes are gone");
  const int checked = static_cast<int>(orphans.size());
  // Once it is down, a1 comes back, empty-handed, and takes work again.
  wait_until([&] { return cluster.serve_log().find("node a1 is down") != std::string::npos; }, 10, "a1 is down");
  cluster.add_agent("a1");
  wait_until([&] { return cluster.all_finished(kJobs); }, 90, "all jobs finished", [&] { return cluster.diagnostics(); });

  const fs::path db = cluster.db();
  CHECK(count(db, "SELECT count(*) FROM cluster_launches WHERE outcome = 'lost'") >= 1);
  CHECK(cluster.serve_log().find("node a1 is back") != std::string::npos);
  const json nodes = cluster.status().at("nodes");
  CHECK(nodes.size() == 3);  // the same node again, not a fourth
  for (const json& node : nodes) CHECK(node.at("connected") == true);
  CHECK(count(db, "SELECT count(*) FROM jobs WHERE status = 'finished' AND executed_work = total_work") == kJobs);
  CHECK(checked > 0);
  CHECK(cluster.serve_log().find("node a1 is down") != std::string::npos);
  // Every line of the serve and agent logs carries its UTC time (ISO 8601).
  const std::regex stamped(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z tessel (serve|agent): )");
  std::istringstream serve_lines(cluster.serve_log());
  int lines = 0;
  for (std::string line; std::getline(serve_lines, line); ++lines) CHECK_MESSAGE(std::regex_search(line, stamped), line);
  CHECK(lines > 3);
  std::istringstream agent_lines(slurp(cluster.dir() / "a1.err"));
  for (std::string line; std::getline(agent_lines, line);) CHECK_MESSAGE(std::regex_search(line, stamped), line);
  CHECK_FALSE(any_log_says(cluster, kJobs, "DUPLICATE"));
  CHECK_FALSE(gpus_shared_at_once(cluster.all_logs()));
}

TEST_CASE("a killed scheduler restarts from its database; every job finishes once, never twice at a time") {
  LocalCluster cluster(std::string(kFifo) + "node_timeout_seconds = 8\ngrace_seconds = 1\n");
  cluster.start_serve();
  for (const char* name : {"a1", "a2", "a3"}) cluster.add_agent(name);
  cluster.wait_for_nodes(3);
  constexpr int kJobs = 12;
  for (int i = 0; i < kJobs; ++i) cluster.submit({1 + i % 2, 100 + 10 * (i % 4)});
  wait_until([&] {
    int running = 0;
    for (const json& job : cluster.jobs()) running += job.at("status") == "running";
    return running >= 4;
  }, 30, "jobs run");
  const std::string first_address = cluster.address();
  auto finished_processes = [&] {
    int done = 0;
    for (const fs::path& file : cluster.all_logs()) {
      const std::string text = slurp(file);
      for (std::size_t at = text.find("train: done"); at != std::string::npos; at = text.find("train: done", at + 1))
        ++done;
    }
    return done;
  };
  const int done_before = finished_processes();
  cluster.kill_serve();
  // While it is down a job ends: its agent must report the exit later.
  // (Well within the agents' 8 s lease, so the others run on.)
  wait_until([&] { return finished_processes() > done_before; }, 4, "a job ends while the scheduler is down");
  cluster.start_serve(first_address);  // agents reconnect to the same address
  // A second daemon on the same database is refused (the killed one's lock died with it).
  const CommandResult second = run_tessel({"serve", (cluster.dir() / "serve.toml").string(), "--listen", "127.0.0.1:0",
                                           "--secret-file", (cluster.dir() / "secret").string()},
                                          cluster.dir());
  CHECK(second.code == 2);
  CHECK(second.err.find("another tessel serve is using this database") != std::string::npos);
  CHECK(cluster.address() == first_address);
  wait_until([&] { return cluster.all_finished(kJobs); }, 90, "all jobs finished after the restart",
             [&] { return cluster.diagnostics(); });

  const fs::path db = cluster.db();
  CHECK(count(db, "SELECT count(*) FROM runs") == 1);  // the same run, resumed
  CHECK(count(db, "SELECT count(*) FROM jobs WHERE status = 'finished' AND executed_work = total_work") == kJobs);
  for (int job = 0; job < kJobs; ++job) {
    INFO("job " << job);
    CHECK(count(db, "SELECT count(*) FROM cluster_launches WHERE outcome = 'finished' AND job_id = " +
                        std::to_string(job)) == 1);
    int done = 0;
    for (const fs::path& file : cluster.logs(job, 0)) {
      const std::string text = slurp(file);
      for (std::size_t at = text.find("train: done"); at != std::string::npos; at = text.find("train: done", at + 1))
        ++done;
    }
    CHECK(done == 1);
    for (int rank = 0; rank < 1 + job % 2; ++rank) {
      auto lives = process_lifetimes(cluster.logs(job, rank));
      std::sort(lives.begin(), lives.end());
      for (std::size_t i = 1; i < lives.size(); ++i) CHECK(lives[i].first >= lives[i - 1].second);
    }
  }
  const std::string log = cluster.serve_log();
  CHECK(log.find("resumed run 1") != std::string::npos);
  CHECK(log.find("adopted") != std::string::npos);  // running jobs survived the restart
  CHECK_FALSE(any_log_says(cluster, kJobs, "DUPLICATE"));
}

TEST_CASE("bad peers are refused and logged; the daemon keeps serving the others") {
  LocalCluster cluster(std::string(kFifo) + "node_timeout_seconds = 5\ngrace_seconds = 2\n");
  cluster.start_serve();
  cluster.add_agent("a1");
  cluster.wait_for_nodes(1);

  // A wrong secret: the client is told, and exits with 2.
  const fs::path wrong = cluster.dir() / "wrong-secret";
  std::ofstream(wrong) << "not-the-secret-at-all-0123456789\n";
  ::chmod(wrong.c_str(), 0600);
  const CommandResult refused =
      run_tessel({"jobs", "--scheduler", cluster.address(), "--secret-file", wrong.string()});
  CHECK(refused.code == 2);
  CHECK(refused.err.find("TLS handshake failed") != std::string::npos);
  CHECK(refused.err.find("wrong secret") != std::string::npos);
  // An agent with a wrong secret gives up with 2 as well.
  const CommandResult agent = run_tessel({"agent", "--scheduler", cluster.address(), "--secret-file",
                                          wrong.string(), "--fake-gpus", "1", "--name", "intruder"});
  CHECK(agent.code == 2);
  // A second live agent under a taken name is refused; the first keeps it.
  const pid_t twin = spawn({tessel_exe().string(), "agent", "--scheduler", cluster.address(), "--secret-file",
                            (cluster.dir() / "secret").string(), "--name", "a1", "--fake-gpus", "4", "--log-dir",
                            (cluster.dir() / "logs-twin").string()},
                           cluster.dir(), cluster.dir() / "twin.out", cluster.dir() / "twin.err");
  wait_until([&] { return cluster.serve_log().find("refused agent a1 from") != std::string::npos; }, 10,
             "the twin is refused");
  end_process(twin, SIGTERM);
  CHECK(slurp(cluster.dir() / "twin.err").find("node name 'a1' is in use by the agent at 127.0.0.1:") !=
        std::string::npos);

  // Raw connections: an oversized frame, random bytes, and garbage after a
  // valid handshake. Each connection is closed by the daemon.
  const Secret secret = cluster.secret();
  auto closed_by_daemon = [&](const std::string& bytes, bool authenticate) {
    RawConnection connection(cluster.address(), secret, authenticate);
    connection.write(bytes);
    return connection.hung_up();  // the daemon's answer is to hang up
  };
  // 1 MiB, beyond the 4 KiB allowed before the handshake.
  CHECK(closed_by_daemon(frame_header(1024 * 1024), false));
  std::string noise;
  for (int i = 0; i < 256; ++i) noise += static_cast<char>((i * 131 + 7) % 251);
  CHECK(closed_by_daemon(noise, false));
  CHECK(closed_by_daemon(encode_frame("{this is not json"), true));
  CHECK(closed_by_daemon(encode_frame(R"({"type":"cancel","job":"seven"})"), true));
  CHECK(closed_by_daemon(encode_frame("{}"), true));

  wait_until([&] {
    const std::string log = cluster.serve_log();
    return log.find("wrong secret") != std::string::npos &&
           log.find("exceeds the 4096-byte limit") != std::string::npos &&
           log.find("bad magic") != std::string::npos && log.find("not valid JSON") != std::string::npos &&
           log.find("'job' in 'cancel' message must be an integer") != std::string::npos;
  }, 10, "every refusal is logged");

  // The others are still served: the agent never noticed, jobs run.
  const CommandResult status = cluster.tessel({"status"});
  CHECK(status.out.find("node a1: up, 4 of 4 GPUs free, 127.0.0.1") != std::string::npos);
  CHECK(cluster.status().at("nodes").size() == 1);  // the refused twin never joined
  cluster.submit({1, 20});
  wait_until([&] { return cluster.all_finished(1); }, 30, "a job finishes after the attacks");

  // A client error is an answer, not a disconnection.
  const CommandResult missing = cluster.tessel({"cancel", "99"});
  CHECK(missing.code == 2);
  CHECK(missing.err == "tessel: no job 99\n");
  const CommandResult ended = cluster.tessel({"cancel", "0"});
  CHECK(ended.err == "tessel: job 0 has already ended (finished)\n");
}

// The daemon's resident memory in bytes, from /proc (VmRSS is in kB).
std::size_t resident_bytes(pid_t pid) {
  std::istringstream status(slurp(fs::path("/proc") / std::to_string(pid) / "status"));
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

TEST_CASE("a stalled frame is dropped after frame_timeout_seconds; too long a frame is refused unallocated") {
  // 16 MiB of unfinished frames at most, all connections together.
  LocalCluster cluster(std::string(kFifo) + "frame_timeout_seconds = 1\nmax_buffered_mib = 16\n");
  cluster.start_serve();
  const Secret secret = cluster.secret();
  auto authenticated = [&] { return std::make_unique<RawConnection>(cluster.address(), secret, true); };

  // A frame announced as 1,000 bytes, 10 sent, then silence.
  auto stalled = authenticated();
  const auto stalled_at = std::chrono::steady_clock::now();
  CHECK(stalled->write(frame_header(1000) + std::string(10, 'x')));
  // Meanwhile the daemon serves others.
  CHECK(cluster.status().at("nodes").empty());
  CHECK(stalled->hung_up());
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - stalled_at).count();
  CHECK(waited >= 0.9);
  CHECK(waited < 5);

  // 4 GiB announced: refused at the header, so the daemon's memory does not grow by it.
  const std::size_t before = resident_bytes(cluster.serve_pid());
  auto greedy = authenticated();
  greedy->write(frame_header(0xffffffffu));
  CHECK(greedy->hung_up());
  CHECK(resident_bytes(cluster.serve_pid()) < before + 8 * 1024 * 1024);

  // Two unfinished 16 MiB frames: the first holds 12 MiB of the 16 MiB shared
  // budget; the second's bytes would pass it, so that connection goes.
  auto first = authenticated();
  CHECK(first->write(frame_header(16 * 1024 * 1024) + std::string(12 * 1024 * 1024, 'x')));
  auto second = authenticated();
  second->write(frame_header(16 * 1024 * 1024) + std::string(8 * 1024 * 1024, 'x'));
  CHECK(second->hung_up());
  CHECK(first->hung_up());  // by its deadline
  CHECK(cluster.status().at("nodes").empty());

  wait_until([&] {
    const std::string log = cluster.serve_log();
    return log.find("frame not completed within 1 s") != std::string::npos &&
           log.find("exceeds the 16777216-byte limit") != std::string::npos &&
           log.find("-byte buffer limit") != std::string::npos;
  }, 10, "every drop is logged");
  // Logged once each: the stalled client and the first large one.
  const std::string log = cluster.serve_log();
  std::size_t timeouts = 0;
  for (auto at = log.find("frame not completed"); at != std::string::npos; at = log.find("frame not completed", at + 1))
    ++timeouts;
  CHECK(timeouts == 2);
}

TEST_CASE("out of descriptors, the daemon logs it once, waits, and accepts again once some are free") {
  LocalCluster cluster(kFifo);
  // The daemon inherits a low descriptor limit; this process keeps its own.
  rlimit files{};
  ::getrlimit(RLIMIT_NOFILE, &files);
  const rlimit saved = files;
  files.rlim_cur = 48;
  ::setrlimit(RLIMIT_NOFILE, &files);
  cluster.start_serve();
  ::setrlimit(RLIMIT_NOFILE, &saved);
  const auto [host, port] = split_host_port(cluster.address(), "address");
  asio::io_context io;
  std::vector<tcp::socket> held;
  for (int i = 0; i < 60 && cluster.serve_log().find("cannot accept connections") == std::string::npos; ++i) {
    held.emplace_back(io).connect(tcp::endpoint(asio::ip::make_address(host), port));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  wait_until([&] { return cluster.serve_log().find("cannot accept connections") != std::string::npos; }, 10,
             "the daemon runs out of descriptors");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  held.clear();
  CHECK(cluster.status().at("nodes").empty());  // served again
  wait_until([&] { return cluster.serve_log().find("accepting connections again") != std::string::npos; }, 10,
             "the daemon says it accepts again");
  const std::string log = cluster.serve_log();
  CHECK(log.find("cannot accept connections") == log.rfind("cannot accept connections"));  // once
}

TEST_CASE("cancel stops a running job and frees its GPUs") {
  LocalCluster cluster(std::string(kFifo) + "node_timeout_seconds = 5\ngrace_seconds = 2\n");
  cluster.start_serve();
  cluster.add_agent("a1", 2);
  cluster.wait_for_nodes(1);
  cluster.submit({2, 100000});  // about half an hour
  cluster.submit({2, 20});
  wait_until([&] { return cluster.jobs().at(0).at("iteration").get<double>() > 5; }, 30, "the long job runs");
  CHECK(cluster.tessel({"cancel", "0"}).out == "cancelled job 0\n");
  wait_until([&] {
    const json jobs = cluster.jobs();
    return jobs.at(0).at("status") == "cancelled" && jobs.at(1).at("status") == "finished";
  }, 30, "the second job ran on the freed GPUs");
  CHECK(slurp(cluster.logs(0, 0).at(0)).find("SIGTERM at iteration") != std::string::npos);
  CHECK(count(cluster.db(), "SELECT count(*) FROM jobs WHERE status = 'cancelled'") == 1);
}

TEST_CASE("a full disk does not stop the daemon: submissions are refused, jobs run on, writing resumes with room") {
  LocalCluster cluster(kFifo, "disk/cluster.db");
  // 1 MiB holds the schema and a few minutes of this run's rows.
  const TestMount disk = TestMount::tmpfs(cluster.dir() / "disk", 1 << 20);
  if (!disk.mounted()) return;  // mounting needs root; CI runs as root
  cluster.start_serve();
  cluster.add_agent("a1", 2);
  cluster.wait_for_nodes(1);
  // About 12 s: it runs past the next write of its progress (every 5 s),
  // which finds the disk full; rounds that change nothing write nothing.
  cluster.submit({1, 600});
  cluster.submit({2, 20});   // waits for the first one's GPU
  wait_until([&] { return cluster.jobs().at(0).at("iteration").get<double>() > 5; }, 30, "the job runs",
             [&] { return cluster.diagnostics(); });
  fill_disk(cluster.dir() / "disk/filler");
  // The next round's rows do not fit.
  wait_until([&] { return !cluster.status().at("database").at("writable").get<bool>(); }, 10,
             "the daemon finds the disk full", [&] { return cluster.diagnostics(); });
  const auto rounds = cluster.status().at("rounds").at("count").get<std::int64_t>();

  const CommandResult refused = cluster.tessel({"submit", "--gpus", "1", "--", train_exe().string()});
  CHECK(refused.code == 2);
  CHECK(refused.err.find("the scheduler cannot write its database: " + cluster.db().string() +
                         ": cannot write: the disk is full") != std::string::npos);
  const CommandResult status = cluster.tessel({"status"});
  CHECK(status.code == 0);
  CHECK(status.out.find("database: cannot write (") != std::string::npos);
  CHECK(status.out.find("1 running, 1 waiting") != std::string::npos);
  const CommandResult jobs = cluster.tessel({"jobs"});
  CHECK(jobs.code == 0);
  CHECK(jobs.err.find("warning: the scheduler cannot write its database") != std::string::npos);

  // The job runs to its end; its end waits in memory. Rounds are held, so
  // the next job is not launched unrecorded.
  wait_until([&] { return cluster.jobs().at(0).at("status") == "finished"; }, 30, "the job finishes",
             [&] { return cluster.diagnostics(); });
  CHECK(count(cluster.db(), "SELECT count(*) FROM cluster_launches WHERE ended IS NOT NULL") == 0);
  CHECK(cluster.jobs().at(1).at("status") == "queued");
  CHECK(cluster.status().at("rounds").at("count").get<std::int64_t>() == rounds);

  fs::remove(cluster.dir() / "disk/filler");
  wait_until([&] { return cluster.status().at("database").at("writable").get<bool>(); }, 10,
             "the daemon writes again", [&] { return cluster.diagnostics(); });
  // Each once: the submissions, the first job's row, its launch, its exit.
  CHECK(count(cluster.db(), "SELECT count(*) FROM cluster_jobs") == 2);
  CHECK(count(cluster.db(), "SELECT count(*) FROM jobs") == 2);
  CHECK(query_text(cluster.db(), "SELECT status FROM jobs WHERE job_id = 0") == "finished");
  CHECK(count(cluster.db(), "SELECT count(*) FROM cluster_launches WHERE job_id = 0") == 1);
  CHECK(count(cluster.db(), "SELECT count(*) FROM cluster_launches WHERE job_id = 0 AND ended IS NOT NULL AND "
                            "outcome = 'finished'") == 1);
  CHECK(count(cluster.db(), "SELECT count(*) FROM cluster_ranks JOIN cluster_launches USING (run_id, launch_id) "
                            "WHERE job_id = 0 AND exit_code = 0") == 1);
  const std::string log = cluster.serve_log();
  const auto once = [&](const std::string& text) {
    const auto at = log.find(text);
    return at != std::string::npos && log.find(text, at + 1) == std::string::npos;
  };
  CHECK(once("cannot write the database, keeping its writes in memory"));
  CHECK(once("writing the database again"));

  CHECK(cluster.submit({1, 20}) == 2);
  wait_until([&] { return cluster.all_finished(3); }, 30, "the other jobs run", [&] { return cluster.diagnostics(); });
  CHECK(count(cluster.db(), "SELECT count(*) FROM cluster_jobs") == 3);
  CHECK(count(cluster.db(), "SELECT count(*) FROM jobs WHERE status = 'finished'") == 3);
}

TEST_CASE("processes get the training environment, across nodes; failing jobs are retried, then given up") {
  LocalCluster cluster(std::string(kFifo) + "node_timeout_seconds = 5\ngrace_seconds = 2\nmax_retries = 1\n");
  cluster.start_serve();
  cluster.add_agent("a1", 2);
  cluster.add_agent("a2", 2);
  cluster.wait_for_nodes(2);
  // Four GPUs on two-GPU nodes: one launch, two nodes, four processes.
  const CommandResult spread = cluster.tessel(
      {"submit", "--gpus", "4", "--env", "CUSTOM=kept", "--workdir", cluster.dir().string(), "--",
       "/bin/sh", "-c",
       "echo env RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$LOCAL_RANK MASTER=$MASTER_ADDR:$MASTER_PORT "
       "CUDA=$CUDA_VISIBLE_DEVICES JOB=$TESSEL_JOB_ID RESUME=${TESSEL_RESUME:-0} CUSTOM=$CUSTOM PATH_KEPT=${PATH:+yes}"});
  REQUIRE(spread.code == 0);
  const CommandResult crash = cluster.tessel({"submit", "--", "/bin/sh", "-c", "echo crashing; exit 3"});
  const CommandResult missing = cluster.tessel({"submit", "--", "/no/such/program"});
  REQUIRE(crash.code == 0);
  REQUIRE(missing.code == 0);
  wait_until([&] {
    const json jobs = cluster.jobs();
    return jobs.at(0).at("status") == "finished" && jobs.at(1).at("status") == "failed" &&
           jobs.at(2).at("status") == "failed";
  }, 30, "one job finishes, two fail");

  std::vector<std::string> lines;
  for (const fs::path& file : cluster.logs(0)) {
    std::istringstream text(slurp(file));
    for (std::string line; std::getline(text, line);)
      if (line.starts_with("env ")) lines.push_back(line);
  }
  std::sort(lines.begin(), lines.end());
  REQUIRE(lines.size() == 4);
  const std::regex env_line(
      "env RANK=([0-3]) WORLD_SIZE=4 LOCAL_RANK=([01]) MASTER=127\\.0\\.0\\.1:29500 CUDA=0,1 JOB=0 RESUME=0 "
      "CUSTOM=kept PATH_KEPT=yes");
  for (int rank = 0; rank < 4; ++rank) {
    std::smatch match;
    REQUIRE_MESSAGE(std::regex_match(lines[rank], match, env_line), lines[rank]);
    CHECK(std::stoi(match[1]) == rank);
    CHECK(std::stoi(match[2]) == rank % 2);
  }
  CHECK(cluster.logs(0).size() == 4);  // rank-0 and rank-1 on one node, rank-2 and rank-3 on the other

  const fs::path db = cluster.db();
  CHECK(count(db, "SELECT count(*) FROM cluster_launches WHERE job_id = 1 AND outcome = 'failed'") == 2);
  CHECK(count(db, "SELECT attempts FROM jobs WHERE job_id = 1") == 2);
  CHECK(count(db, "SELECT count(*) FROM cluster_ranks r JOIN cluster_launches l USING (run_id, launch_id) "
                  "WHERE l.job_id = 1 AND r.exit_code = 3") == 2);
  CHECK(count(db, "SELECT count(*) FROM cluster_ranks r JOIN cluster_launches l USING (run_id, launch_id) "
                  "WHERE l.job_id = 2 AND r.exit_code = 127") == 2);
  bool explained = false;
  for (const fs::path& file : cluster.logs(2)) explained = explained || slurp(file).find("tessel: cannot run '/no/such/program'") != std::string::npos;
  CHECK(explained);
  CHECK(cluster.serve_log().find("job 1 failed 2 times; giving up") != std::string::npos);
}

TEST_CASE("a burst of 1,000 submissions is accepted and listed, none lost") {
  LocalCluster cluster(kFifo);
  cluster.start_serve();
  constexpr int kThreads = 8, kEach = 125;
  std::vector<std::thread> threads;
  std::vector<std::vector<std::int64_t>> ids(kThreads);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      SchedulerClient client(cluster.address(), cluster.secret());
      JobRequest request;
      request.command = {"/bin/true"};
      request.workdir = "/";
      request.tenant = "burst";
      for (int i = 0; i < kEach; ++i)
        ids[t].push_back(client.request(message("submit", {{"job", request.to_json()}})).integer("job", 0));
    });
  for (auto& thread : threads) thread.join();
  std::vector<std::int64_t> all;
  for (const auto& part : ids) all.insert(all.end(), part.begin(), part.end());
  std::sort(all.begin(), all.end());
  CHECK(std::adjacent_find(all.begin(), all.end()) == all.end());
  REQUIRE(all.size() == 1000);
  CHECK(all.front() == 0);
  CHECK(all.back() == 999);

  const CommandResult listed = cluster.tessel({"jobs", "--format", "json"});
  REQUIRE(listed.code == 0);
  CHECK(json::parse(listed.out).size() == 1000);
  CHECK(count(cluster.db(), "SELECT count(*) FROM cluster_jobs") == 1000);
  CHECK(count(cluster.db(), "SELECT count(*) FROM jobs WHERE tenant = 'burst'") == 1000);
}

namespace {

// One round every half second; a lost node is down after a second of
// silence, its processes surely gone 2.5 s later.
std::string elastic_cluster(const std::string& elasticity) {
  return R"([scheduler]
round_seconds = 0.5
allocation = { plugin = "fifo", backfill = true }
placement = { plugin = "consolidated" }
)" + elasticity + R"(
[serve]
heartbeat_seconds = 0.2
node_timeout_seconds = 1
grace_seconds = 0.5
)";
}

// Starts an elastic job of 4 GPUs (2 to 4) over two agents of 2 GPUs each
// and kills one of them, a2, once the job makes progress.
void lose_a_node_under_an_elastic_job(LocalCluster& cluster) {
  cluster.start_serve();
  cluster.add_agent("a1", 2);
  cluster.add_agent("a2", 2);
  cluster.wait_for_nodes(2);
  REQUIRE(cluster.submit({4, 300, 2, 4}) == 0);
  wait_until([&] {
    const json job = cluster.jobs().at(0);
    return job.at("status") == "running" && job.at("nodes").size() == 2 && job.at("iteration").get<double>() > 20;
  }, 30, "the job runs on both nodes", [&] { return cluster.diagnostics(); });
  cluster.kill_agent("a2");
}

}  // namespace

TEST_CASE("shrink_on_failure on real nodes: an elastic job that loses a node resumes on the GPUs it has left") {
  LocalCluster cluster(elastic_cluster("elasticity = { plugin = \"shrink_on_failure\" }"));
  lose_a_node_under_an_elastic_job(cluster);
  wait_until([&] { return cluster.all_finished(1); }, 60, "the job finished on a1", [&] { return cluster.diagnostics(); });

  const fs::path db = cluster.db();
  CHECK(count(db, "SELECT count(*) FROM cluster_launches") == 2);
  CHECK(count(db, "SELECT count(*) FROM cluster_launches WHERE launch_id = 1 AND outcome = 'lost'") == 1);
  // Relaunched at its new size on the node it kept, resuming from its checkpoint.
  CHECK(count(db, "SELECT count(*) FROM cluster_launches WHERE launch_id = 2 AND resume = 1 AND outcome = 'finished'") == 1);
  CHECK(count(db, "SELECT count(*) FROM cluster_ranks WHERE launch_id = 2") == 2);
  CHECK(count(db, "SELECT count(*) FROM cluster_ranks WHERE launch_id = 2 AND node = 'a1'") == 2);
  CHECK(any_log_says(cluster, 1, "resuming from"));
  // The same facts as a simulation's: a resize, the elasticity plugin's
  // decision, one attempt, and the run's figures.
  CHECK(count(db, "SELECT count(*) FROM resizes WHERE job_id = 0 AND from_gpus = 4 AND to_gpus = 2") == 1);
  CHECK(count(db, "SELECT count(*) FROM decisions WHERE stage = 'elasticity' AND code = 'shrink'") == 1);
  CHECK(count(db, "SELECT count(*) FROM jobs WHERE status = 'finished' AND executed_work = total_work AND "
                  "attempts = 1 AND preemptions = 0") == 1);
  wait_until([&] { return count(db, "SELECT count(*) FROM metrics WHERE name = 'finished' AND value = 1") == 1; }, 15,
             "the run's figures count the finished job");
  CHECK_FALSE(any_log_says(cluster, 1, "DUPLICATE"));
  CHECK_FALSE(gpus_shared_at_once(cluster.all_logs()));
}

TEST_CASE("without elasticity on real nodes, an elastic job that loses a node waits for its GPUs again") {
  LocalCluster cluster(elastic_cluster(""));
  lose_a_node_under_an_elastic_job(cluster);
  wait_until([&] { return cluster.jobs().at(0).at("status") == "preempted"; }, 20, "the job is requeued",
             [&] { return cluster.diagnostics(); });
  const fs::path db = cluster.db();
  CHECK(count(db, "SELECT count(*) FROM cluster_launches WHERE launch_id = 1 AND outcome = 'lost'") == 1);
  CHECK(count(db, "SELECT count(*) FROM decisions WHERE code = 'stop' AND reason = 'lost node a2'") == 1);
  // It needs 4 GPUs: it runs again once a2 is back.
  cluster.add_agent("a2", 2);
  wait_until([&] { return cluster.all_finished(1); }, 60, "the job finished", [&] { return cluster.diagnostics(); });
  CHECK(count(db, "SELECT count(*) FROM resizes") == 0);
  CHECK(count(db, "SELECT count(*) FROM cluster_launches WHERE launch_id = 2 AND resume = 1 AND outcome = 'finished'") == 1);
  CHECK(count(db, "SELECT count(DISTINCT node) FROM cluster_ranks WHERE launch_id = 2") == 2);
  CHECK_FALSE(any_log_says(cluster, 1, "DUPLICATE"));
}
