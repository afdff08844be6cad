// Submission at cluster speed (issue 14): `tessel submit --file` (many jobs
// in one request, all or none), group commit of concurrent submissions (one
// transaction, each acknowledged only once it is durable) and one connection
// carrying many requests.
#include <doctest/doctest.h>

#include <algorithm>
#include <regex>
#include <set>
#include <thread>

#include <boost/asio/write.hpp>

#include "frame.hpp"
#include "job_request.hpp"
#include "local_cluster.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::cluster;
using namespace tessel::test;

namespace {

// No agents: the jobs stay queued, so the tests read what was submitted.
const char* kQueueOnly = R"([scheduler]
round_seconds = 0.5
allocation = { plugin = "fifo" }
placement = { plugin = "consolidated" }
)";

std::vector<std::int64_t> printed_ids(const std::string& out) {
  std::vector<std::int64_t> ids;
  const std::regex line("submitted job ([0-9]+)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator(); ++it)
    ids.push_back(std::stoll((*it)[1]));
  return ids;
}

// Every id from 0 to n-1 exactly once.
bool each_once(std::vector<std::int64_t> ids, std::size_t n) {
  std::sort(ids.begin(), ids.end());
  if (ids.size() != n) return false;
  for (std::size_t i = 0; i < n; ++i)
    if (ids[i] != static_cast<std::int64_t>(i)) return false;
  return true;
}

std::vector<std::int64_t> listed_ids(LocalCluster& cluster) {
  std::vector<std::int64_t> ids;
  for (const json& job : cluster.jobs()) ids.push_back(job.at("id").get<std::int64_t>());
  return ids;
}

}  // namespace

TEST_CASE("read_job_batch reads [[job]] tables and JSON lines with the keys of a job file") {
  TempDir dir;
  const fs::path toml = dir.write("jobs.toml", R"([[job]]
name = "a"
command = ["python", "train.py"]
gpus = 2
workdir = "runs/a"

[[job]]
command = "echo hi"
min_gpus = 1
max_gpus = 4
gpus = 2
env = { NCCL_DEBUG = "INFO" }
iterations = 50
)");
  const std::vector<JobRequest> jobs = read_job_batch(toml, "/elsewhere");
  REQUIRE(jobs.size() == 2);
  CHECK(jobs[0].name == "a");
  CHECK(jobs[0].command == std::vector<std::string>{"python", "train.py"});
  CHECK(jobs[0].gpus == 2);
  CHECK(jobs[0].workdir == (dir.path() / "runs/a").string());  // relative to the file
  CHECK(jobs[1].command == std::vector<std::string>{"/bin/sh", "-c", "echo hi"});
  CHECK(jobs[1].min_gpus == 1);
  CHECK(jobs[1].max_gpus == 4);
  CHECK(jobs[1].env.at("NCCL_DEBUG") == "INFO");
  CHECK(jobs[1].iterations == 50);
  CHECK(jobs[1].workdir == "/elsewhere");

  const fs::path lines = dir.write("jobs.jsonl", "{\"name\": \"x\", \"command\": [\"/bin/true\"], \"gpus\": 3}\n"
                                                 "\n"
                                                 "{\"command\": \"sleep 1\", \"workdir\": \"w\", \"priority\": 2.5}\n");
  const std::vector<JobRequest> from_lines = read_job_batch(lines, "/elsewhere");
  REQUIRE(from_lines.size() == 2);
  CHECK(from_lines[0].name == "x");
  CHECK(from_lines[0].gpus == 3);
  CHECK(from_lines[1].command.back() == "sleep 1");
  CHECK(from_lines[1].workdir == (dir.path() / "w").string());
  CHECK(from_lines[1].priority == 2.5);
  // .json is read as JSON lines too.
  fs::copy_file(lines, dir.path() / "jobs.json");
  CHECK(read_job_batch(dir.path() / "jobs.json", "/").size() == 2);
}

TEST_CASE("read_job_batch reports every bad job at once, by line, column and key") {
  TempDir dir;
  const fs::path toml = dir.write("bad.toml", R"([[job]]
command = ["ok"]

[[job]]
command = ["x"]
gpus = "two"

[[job]]
gpsu = 1

[[job]]
command = ["y"]
env = { RANK = "1" }
)");
  try {
    read_job_batch(toml, "/");
    FAIL("a bad batch was read");
  } catch (const ConfigError& e) {
    const std::string text = e.what();
    CHECK(text.find(toml.string() + ":6:8: 'gpus' in [job] must be an integer, got a string") != std::string::npos);
    CHECK(text.find(toml.string() + ":8:1: [job] is missing required key 'command'") == std::string::npos);
    CHECK(text.find("the job needs a command") != std::string::npos);
    CHECK(text.find(toml.string() + ":9:1: unknown key 'gpsu' in [job]") != std::string::npos);
    CHECK(text.find(toml.string() + ":11:1: env may not set RANK") != std::string::npos);
    CHECK(e.diagnostics().size() == 4);
  }

  const fs::path lines = dir.write("bad.jsonl", "{\"command\": [\"ok\"]}\n"
                                               "{\"command\": [\"x\"], \"gpus\": 0}\n"
                                               "{\"command\": [\"x\"], \"gpus\": null}\n"
                                               "{\"command\": [\"x\"] \"gpus\": 1}\n"
                                               "[1, 2]\n"
                                               "{\"command\": [\"x\"], \"tenat\": \"a\"}\n");
  try {
    read_job_batch(lines, "/");
    FAIL("a bad batch was read");
  } catch (const ConfigError& e) {
    const std::string text = e.what();
    CHECK(text.find(lines.string() + ":2: 'gpus' in [job] must be in 1..65536, got 0") != std::string::npos);
    CHECK(text.find(lines.string() + ":3: 'gpus' is null") != std::string::npos);
    // Where the parser stopped on line 4: the column after the unexpected token.
    CHECK(text.find(lines.string() + ":4:24: not JSON: syntax error") != std::string::npos);
    CHECK(text.find(lines.string() + ":5: each line must be one job object") != std::string::npos);
    CHECK(text.find(lines.string() + ":6: unknown key 'tenat' in [job]") != std::string::npos);
    CHECK(e.diagnostics().size() == 5);
  }

  CHECK_THROWS_WITH_AS(read_job_batch(dir.write("jobs.yaml", "- x\n"), "/"),
                       doctest::Contains("unknown job file type '.yaml' (valid: .toml"), UserError);
  CHECK_THROWS_WITH_AS(read_job_batch(dir.write("empty.toml", "\n"), "/"),
                       doctest::Contains("no jobs: write each job as a [[job]] table"), ConfigError);
  CHECK_THROWS_WITH_AS(read_job_batch(dir.write("flat.toml", "command = [\"x\"]\n"), "/"),
                       doctest::Contains("unknown key 'command'"), ConfigError);
}

TEST_CASE("submit --file: a batch of N jobs, TOML or JSON lines, is submitted once each and listed") {
  LocalCluster cluster(kQueueOnly);
  cluster.start_serve();
  constexpr int kToml = 300, kLines = 200;
  std::string toml, lines;
  for (int i = 0; i < kToml; ++i)
    toml += "[[job]]\nname = \"t" + std::to_string(i) + "\"\ncommand = [\"/bin/true\"]\ntenant = \"batch\"\n";
  for (int i = 0; i < kLines; ++i)
    lines += "{\"name\": \"l" + std::to_string(i) + "\", \"command\": [\"/bin/true\"], \"tenant\": \"batch\"}\n";
  const fs::path toml_file = cluster.dir() / "jobs.toml";
  std::ofstream(toml_file) << toml;
  const fs::path lines_file = cluster.dir() / "jobs.jsonl";
  std::ofstream(lines_file) << lines;

  const CommandResult first = cluster.tessel({"submit", "--file", toml_file.string()});
  REQUIRE_MESSAGE(first.code == 0, first.err);
  const CommandResult second = cluster.tessel({"submit", "--file", lines_file.string()});
  REQUIRE_MESSAGE(second.code == 0, second.err);
  std::vector<std::int64_t> ids = printed_ids(first.out);
  CHECK(ids.size() == kToml);
  const std::vector<std::int64_t> more = printed_ids(second.out);
  CHECK(more.size() == kLines);
  ids.insert(ids.end(), more.begin(), more.end());
  CHECK(each_once(ids, kToml + kLines));
  CHECK(each_once(listed_ids(cluster), kToml + kLines));
  const json jobs = cluster.jobs();
  CHECK(jobs.at(0).at("name") == "t0");
  CHECK(jobs.at(kToml).at("name") == "l0");
  CHECK(count(cluster.db(), "SELECT count(*) FROM cluster_jobs") == kToml + kLines);
  CHECK(count(cluster.db(), "SELECT count(*) FROM jobs WHERE tenant = 'batch'") == kToml + kLines);
  // Each file was one transaction.
  CHECK(cluster.status().at("submissions") == json{{"jobs", kToml + kLines}, {"commits", 2}});
}

TEST_CASE("submit --file refuses a bad batch with every located error, exit 2, and submits nothing") {
  LocalCluster cluster(kQueueOnly);
  cluster.start_serve();
  const fs::path toml = cluster.dir() / "bad.toml";
  std::ofstream(toml) << "[[job]]\ncommand = [\"/bin/true\"]\n\n[[job]]\ncommand = [\"/bin/true\"]\ngpus = -1\n"
                         "\n[[job]]\ncommand = [\"/bin/true\"]\nprocesses = \"per_rack\"\n";
  const CommandResult refused = cluster.tessel({"submit", "--file", toml.string()});
  CHECK(refused.code == 2);
  CHECK(refused.err.find(toml.string() + ":6:8: 'gpus' in [job] must be in 1..65536, got -1") != std::string::npos);
  CHECK(refused.err.find(toml.string() + ":10:13: unknown processes 'per_rack' in [job] (valid: per_gpu, per_node)") !=
        std::string::npos);

  const fs::path lines = cluster.dir() / "bad.jsonl";
  std::ofstream(lines) << "{\"command\": [\"/bin/true\"]}\n{\"command\": [], \"gpus\": 1}\n";
  const CommandResult refused_lines = cluster.tessel({"submit", "--file", lines.string()});
  CHECK(refused_lines.code == 2);
  CHECK(refused_lines.err.find(lines.string() + ":2: the job has no command") != std::string::npos);

  const CommandResult other = cluster.tessel({"submit", "--file", (cluster.dir() / "jobs.csv").string()});
  CHECK(other.code == 2);
  CHECK(other.err.find("valid: .toml") != std::string::npos);
  // The file holds every job's keys: flags beside it are refused, not applied or ignored.
  std::ofstream(cluster.dir() / "one.toml") << "[[job]]\ncommand = [\"/bin/true\"]\n";
  const CommandResult mixed =
      cluster.tessel({"submit", "--file", (cluster.dir() / "one.toml").string(), "--gpus", "2"});
  CHECK(mixed.code == 2);
  CHECK(mixed.err.find("the jobs come from the file alone") != std::string::npos);

  CHECK(cluster.jobs().empty());
  CHECK(count(cluster.db(), "SELECT count(*) FROM cluster_jobs") == 0);
  CHECK(cluster.status().at("submissions").at("commits") == 0);
}

TEST_CASE("the daemon refuses a batch with one bad job whole, and the connection goes on") {
  LocalCluster cluster(kQueueOnly);
  cluster.start_serve();
  SchedulerClient client(cluster.address(), cluster.secret());
  JobRequest good;
  good.command = {"/bin/true"};
  good.workdir = "/";
  good.tenant = "t";
  json bad = good.to_json();
  bad["gpus"] = 0;
  CHECK_THROWS_WITH_AS(client.request(message("submit_batch", {{"jobs", {good.to_json(), bad}}})),
                       doctest::Contains("job 2 of the batch: "), UserError);
  CHECK(client.request(message("jobs")).array("jobs").empty());
  const Message reply = client.request(message("submit_batch", {{"jobs", {good.to_json(), good.to_json()}}}));
  CHECK(reply.array("jobs") == json{0, 1});
}

TEST_CASE("submissions that arrive together share one transaction, and are answered in order after it") {
  LocalCluster cluster(kQueueOnly);
  cluster.start_serve();
  JobRequest job;
  job.command = {"/bin/true"};
  job.workdir = "/";
  job.tenant = "grouped";
  // Five submissions and a status, in one write: the daemon reads them in
  // one turn of its io_context.
  std::string frames;
  for (int i = 0; i < 5; ++i) frames += encode_frame(message("submit", {{"job", job.to_json()}}).dump());
  frames += encode_frame(message("status").dump());
  RawConnection connection(cluster.address(), cluster.secret(), /*login=*/true);
  REQUIRE(connection.write(frames));
  std::vector<Message> replies;
  while (replies.size() < 6) replies.push_back(connection.receive());
  for (int i = 0; i < 5; ++i) {
    CHECK(replies[i].type() == "submitted");
    CHECK(replies[i].integer("job") == i);
  }
  // The status comes after the submissions it followed, and counts them.
  REQUIRE(replies[5].type() == "status");
  CHECK(replies[5].body().at("jobs").at("waiting") == 5);
  CHECK(replies[5].body().at("submissions") == json{{"jobs", 5}, {"commits", 1}});
}

TEST_CASE("parallel single submissions are each journalled once and survive a kill right after their answer") {
  LocalCluster cluster(kQueueOnly);
  cluster.start_serve();
  constexpr int kClients = 16, kEach = 40;
  std::vector<std::vector<std::int64_t>> ids(kClients);
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c)
    threads.emplace_back([&, c] {
      // One connection for all of a client's requests.
      SchedulerClient client(cluster.address(), cluster.secret(), {}, 60);
      JobRequest request;
      request.command = {"/bin/true"};
      request.workdir = "/";
      request.tenant = "c" + std::to_string(c);
      for (int i = 0; i < kEach; ++i)
        ids[c].push_back(client.request(message("submit", {{"job", request.to_json()}})).integer("job", 0));
    });
  for (auto& thread : threads) thread.join();
  // Killed the moment the last answer is in: what was answered is on disk.
  cluster.kill_serve();
  std::vector<std::int64_t> all;
  for (const auto& part : ids) all.insert(all.end(), part.begin(), part.end());
  CHECK(each_once(all, kClients * kEach));
  CHECK(count(cluster.db(), "SELECT count(*) FROM cluster_jobs") == kClients * kEach);

  cluster.start_serve();
  CHECK(each_once(listed_ids(cluster), kClients * kEach));
  // Each client's jobs under its ids, with its tenant.
  const json jobs = cluster.jobs();
  for (int c = 0; c < kClients; ++c)
    for (std::int64_t id : ids[c]) CHECK(jobs.at(id).at("tenant") == "c" + std::to_string(c));
  // The next id follows the recovered ones.
  CHECK(cluster.submit({1, 10}) == kClients * kEach);
}

TEST_CASE("after a restart, the run's figures still count the jobs that finished before it") {
  // The journal computes the figures from the job rows it holds in memory:
  // a restarted daemon must hold the recovered ones too.
  LocalCluster cluster(std::string(kQueueOnly) + "[serve]\nheartbeat_seconds = 0.2\n");
  cluster.start_serve();
  cluster.add_agent("a1", 2);
  cluster.wait_for_nodes(1);
  cluster.submit({1, 10});
  cluster.submit({1, 10});
  wait_until([&] { return cluster.all_finished(2); }, 60, "both jobs finish", [&] { return cluster.diagnostics(); });
  wait_until([&] { return count(cluster.db(), "SELECT count(*) FROM metrics WHERE name = 'finished' AND value = 2") == 1; },
             30, "the figures count both");
  const std::string address = cluster.address();
  cluster.kill_serve();
  const std::int64_t rounds = count(cluster.db(), "SELECT events FROM runs");
  cluster.start_serve(address);
  // The restarted daemon has written its totals (its rounds count on) ...
  wait_until([&] { return count(cluster.db(), "SELECT events FROM runs") > rounds; }, 30,
             "the restarted daemon writes the run's totals", [&] { return cluster.diagnostics(); });
  // ... with the figures of every job, the recovered ones included.
  CHECK(count(cluster.db(), "SELECT count(*) FROM metrics WHERE name = 'finished' AND value = 2") == 1);
}

TEST_CASE("a batch the disk cannot hold is refused, never acknowledged; its ids stay, cancelled") {
  LocalCluster cluster(kQueueOnly, "disk/cluster.db");
  // 1 MiB holds the schema, not 10,000 submissions.
  const TestMount disk = TestMount::tmpfs(cluster.dir() / "disk", 1 << 20);
  if (!disk.mounted()) return;  // mounting needs root; CI runs as root
  cluster.start_serve();
  std::string lines;
  for (int i = 0; i < 10'000; ++i)
    lines += "{\"name\": \"job-with-a-longer-name-" + std::to_string(i) + "\", \"command\": [\"/bin/true\"]}\n";
  std::ofstream(cluster.dir() / "many.jsonl") << lines;
  const CommandResult refused = cluster.tessel({"submit", "--file", (cluster.dir() / "many.jsonl").string()});
  CHECK(refused.code == 2);
  CHECK(refused.err.find("the scheduler cannot write its database: " + cluster.db().string()) != std::string::npos);
  CHECK(refused.out.find("submitted job") == std::string::npos);
  const json status = cluster.status();
  CHECK_FALSE(status.at("database").at("writable").get<bool>());
  CHECK(status.at("submissions").at("jobs") == 0);
  // The ids were taken by the time the disk refused: they stay, as cancelled.
  const json jobs = cluster.jobs();
  CHECK(jobs.size() == 10'000);
  CHECK(std::all_of(jobs.begin(), jobs.end(), [](const json& job) { return job.at("status") == "cancelled"; }));
  // A later single submission is refused at once.
  const CommandResult single = cluster.tessel({"submit", "--", "/bin/true"});
  CHECK(single.code == 2);
  CHECK(single.err.find("the scheduler cannot write its database") != std::string::npos);
}

TEST_CASE("submit --file speaks the TLS mode its flags name, as every client command does") {
  LocalCluster cluster(std::string(kQueueOnly) + "[serve]\ninsecure = true\n");
  TlsSettings plaintext;
  plaintext.insecure = true;
  cluster.set_peer_tls({"--insecure"}, plaintext);
  cluster.start_serve();
  const fs::path lines = cluster.dir() / "jobs.jsonl";
  std::ofstream(lines) << "{\"command\": [\"/bin/true\"]}\n{\"command\": [\"/bin/true\"]}\n";
  const CommandResult submitted = cluster.tessel({"submit", "--file", lines.string()});
  REQUIRE_MESSAGE(submitted.code == 0, submitted.err);
  CHECK(each_once(printed_ids(submitted.out), 2));
}

TEST_CASE("a batch over kMaxBatchJobs is refused whole, by the client and by the daemon") {
  LocalCluster cluster(kQueueOnly);
  cluster.start_serve();
  const fs::path lines = cluster.dir() / "many.jsonl";
  {
    std::ofstream out(lines);
    for (std::size_t i = 0; i <= kMaxBatchJobs; ++i) out << "{\"command\": [\"/bin/true\"]}\n";
  }
  const CommandResult refused = cluster.tessel({"submit", "--file", lines.string()});
  CHECK(refused.code == 2);
  CHECK(refused.err.find("50001 jobs, over the 50000 one submission may carry; split the file") != std::string::npos);
  // A client that skips that check meets the daemon's.
  JobRequest job;
  job.command = {"/bin/true"};
  job.workdir = "/";
  const json batch = message("submit_batch", {{"jobs", json(kMaxBatchJobs + 1, job.to_json())}});
  CHECK_THROWS_WITH_AS(cluster.request(batch), doctest::Contains("over the 50000 one request may carry"), UserError);
  CHECK(cluster.jobs().empty());
}
