// Real nodes, end to end, under change: an elasticity plugin resizing a
// running job (a stop and a relaunch at the new size, resuming), and an
// agent cut off by a network partition (a relay that black-holes its
// connection). `tessel serve` and `tessel agent` processes on loopback
// (local_cluster.hpp) run the example `train` job behind a shell that first
// prints the environment the process got; the checks read what the job
// processes themselves wrote: their environment, where they resumed, and
// when they started and ended.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>

#include "local_cluster.hpp"
#include "relay.hpp"
#include "results/sqlite.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

// One job process, as it told its own log.
struct Life {
  std::string node;
  int launch = 0, rank = 0, world = 0;
  bool resume = false;
  std::vector<int> gpus;       // CUDA_VISIBLE_DEVICES
  long from = -1;              // the iteration it started at
  long checkpointed = -1;      // stopped: what it checkpointed
  bool done = false;           // ran to the end
  double started = -1;         // wall-clock seconds, from the process
  double ended = std::numeric_limits<double>::infinity();  // none written: it never ended cleanly
};

// What the job's shell prints before it execs train.
const char* kEnvLine = "echo \"env LAUNCH=$TESSEL_LAUNCH_ID RANK=$RANK WORLD_SIZE=$WORLD_SIZE "
                       "CUDA=$CUDA_VISIBLE_DEVICES RESUME=${TESSEL_RESUME:-0}\"; exec \"$@\"";

// Every process of `job`, on every node, in order of start.
std::vector<Life> lives(const LocalCluster& cluster, int job) {
  const std::regex env(R"(^env LAUNCH=([0-9]+) RANK=([0-9]+) WORLD_SIZE=([0-9]+) CUDA=([0-9,]*) RESUME=([01])$)");
  const std::regex start(R"(^train: start pid [0-9]+ rank [0-9]+ at ([0-9.]+), (resuming from|starting at) iteration ([0-9]+))");
  const std::regex stopped(R"(^train: SIGTERM at iteration [0-9]+; checkpointed ([0-9]+); exiting at ([0-9.]+))");
  const std::regex done(R"(^train: done [0-9]+ of [0-9]+ at ([0-9.]+))");
  std::vector<Life> all;
  for (const fs::path& file : cluster.logs(job)) {
    // <dir>/logs-<node>/job-<id>/rank-<r>.log
    const std::string node = file.parent_path().parent_path().filename().string().substr(5);
    std::istringstream text(slurp(file));
    for (std::string line; std::getline(text, line);) {
      std::smatch m;
      if (std::regex_search(line, m, env)) {
        Life life;
        life.node = node;
        life.launch = std::stoi(m[1]);
        life.rank = std::stoi(m[2]);
        life.world = std::stoi(m[3]);
        std::stringstream list(m[4].str());
        for (std::string gpu; std::getline(list, gpu, ',');) life.gpus.push_back(std::stoi(gpu));
        life.resume = m[5] == "1";
        all.push_back(std::move(life));
      } else if (all.empty()) {
        continue;
      } else if (std::regex_search(line, m, start)) {
        all.back().started = std::stod(m[1]);
        all.back().from = std::stol(m[3]);
      } else if (std::regex_search(line, m, stopped)) {
        all.back().checkpointed = std::stol(m[1]);
        all.back().ended = std::stod(m[2]);
      } else if (std::regex_search(line, m, done)) {
        all.back().done = true;
        all.back().ended = std::stod(m[1]);
      }
    }
  }
  std::sort(all.begin(), all.end(), [](const Life& a, const Life& b) { return a.started < b.started; });
  return all;
}

bool overlap(const Life& a, const Life& b) { return a.started < b.ended && b.started < a.ended; }

bool share_a_gpu(const Life& a, const Life& b) {
  if (a.node != b.node) return false;
  for (int gpu : a.gpus)
    if (std::find(b.gpus.begin(), b.gpus.end(), gpu) != b.gpus.end()) return true;
  return false;
}

std::string describe(const Life& life) {
  std::ostringstream text;
  text << "launch " << life.launch << " rank " << life.rank << " on " << life.node << " [" << life.started << ", "
       << life.ended << "]";
  return text.str();
}

// No two launches of one job ran at once, and no two launches (of any job)
// shared a GPU at once; every process started and ended by its own word.
void check_lifetimes(const std::map<int, std::vector<Life>>& by_job) {
  std::vector<std::pair<int, Life>> all;
  for (const auto& [job, processes] : by_job)
    for (const Life& life : processes) {
      INFO("job " << job << " " << describe(life));
      CHECK(life.started > 0);
      CHECK(life.ended < std::numeric_limits<double>::infinity());
      all.emplace_back(job, life);
    }
  for (std::size_t i = 0; i < all.size(); ++i)
    for (std::size_t j = i + 1; j < all.size(); ++j) {
      const auto& [job_a, a] = all[i];
      const auto& [job_b, b] = all[j];
      if (a.launch == b.launch || !overlap(a, b)) continue;
      INFO("job " << job_a << " " << describe(a) << " and job " << job_b << " " << describe(b));
      CHECK(job_a != job_b);
      CHECK_FALSE(share_a_gpu(a, b));
    }
}

// The processes of one launch of `processes`.
std::vector<Life> of_launch(const std::vector<Life>& processes, int launch) {
  std::vector<Life> out;
  std::copy_if(processes.begin(), processes.end(), std::back_inserter(out),
               [&](const Life& life) { return life.launch == launch; });
  return out;
}

// Launch ids of `processes`, in order of start.
std::vector<int> launch_ids(const std::vector<Life>& processes) {
  std::vector<int> ids;
  for (const Life& life : processes)
    if (std::find(ids.begin(), ids.end(), life.launch) == ids.end()) ids.push_back(life.launch);
  return ids;
}

// Submits `train` behind the shell that prints its environment, with a grace
// of 2 s; returns the job's id.
int submit_train(LocalCluster& cluster, const std::string& name, int gpus, int iterations, int min_gpus = 0,
                 int max_gpus = 0) {
  const fs::path workdir = cluster.dir() / "work" / name;
  fs::create_directories(workdir);
  std::vector<std::string> args{"submit", "--gpus", std::to_string(gpus), "--name", name, "--iterations",
                                std::to_string(iterations), "--workdir", workdir.string(), "--grace-seconds", "2"};
  if (min_gpus > 0) args.insert(args.end(), {"--min-gpus", std::to_string(min_gpus), "--max-gpus", std::to_string(max_gpus)});
  args.insert(args.end(), {"--", "/bin/sh", "-c", kEnvLine, "sh", train_exe().string(), "--iterations",
                           std::to_string(iterations), "--sleep-ms", "20", "--checkpoint-every", "10"});
  const CommandResult result = cluster.tessel(args);
  REQUIRE_MESSAGE(result.code == 0, result.err);
  std::smatch match;
  REQUIRE(std::regex_search(result.out, match, std::regex("submitted job ([0-9]+)")));
  return std::stoi(match[1]);
}

int occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// How many times `job`'s processes ran to the end, over all its rank-0 logs.
int finished_runs(const LocalCluster& cluster, int job) {
  int n = 0;
  for (const fs::path& file : cluster.logs(job, 0)) n += occurrences(slurp(file), "train: done");
  return n;
}

// An elasticity policy: while a job waits, elastic jobs shrink to their
// minimum to make room; while none waits, they grow into the free GPUs.
const char* kGrowOrMakeRoom = R"(import tessel


class GrowOrMakeRoom:
    def resize(self, view):
        waiting = any(job.waiting() for job in view.active())
        free = view.cluster().free_gpus()
        proposals = []
        for job in view.active():
            if not (job.running() and job.spec.elastic()):
                continue
            held = job.allocation.gpu_count()
            if waiting and held > job.spec.min_gpus:
                proposals.append(tessel.ResizeProposal(job.spec.id, job.spec.min_gpus, reason="a job waits"))
            elif not waiting and free > 0 and held < job.spec.max_gpus:
                to = min(job.spec.max_gpus, held + free)
                free -= to - held
                proposals.append(tessel.ResizeProposal(job.spec.id, to, reason="GPUs are free"))
        return proposals

    def reconfiguration_seconds(self, view, job, from_, to):
        return 0.0

    def keep_after_loss(self, view, job, remaining):
        return False
)";

// Rounds every half second, fifo and consolidated.
std::string settings(const std::string& elasticity, const std::string& serve) {
  return "[scheduler]\nround_seconds = 0.5\nallocation = { plugin = \"fifo\", backfill = true }\n"
         "placement = { plugin = \"consolidated\" }\n" +
         elasticity + "\n[serve]\n" + serve;
}

std::string elastic_settings(const TempDir& policy_dir) {
  const fs::path policy = policy_dir.write("grow_or_make_room.py", kGrowOrMakeRoom);
  return settings("elasticity = { plugin = \"python\", module = \"" + policy.string() +
                      "\", class = \"GrowOrMakeRoom\" }",
                  "heartbeat_seconds = 0.2\nnode_timeout_seconds = 5\n");
}

// Starts the daemon and agent a1, with `gpus` GPUs, connected through a
// relay the test may cut.
std::unique_ptr<TcpRelay> start_behind_relay(LocalCluster& cluster, int gpus) {
  cluster.start_serve();
  auto relay = std::make_unique<TcpRelay>(cluster.address());
  cluster.add_agent("a1", gpus, relay->address());
  cluster.wait_for_nodes(1);
  return relay;
}

}  // namespace

TEST_CASE("an elasticity plugin grows a job into freed GPUs and shrinks it for a new job: each a stop and a "
          "relaunch at the new size, resuming from its checkpoint") {
  const TempDir policy_dir;
  LocalCluster cluster(elastic_settings(policy_dir));
  cluster.start_serve();
  cluster.add_agent("a1", 4);
  cluster.wait_for_nodes(1);
  const int before = submit_train(cluster, "before", 2, 150);  // 3 s on two of the four GPUs
  wait_until([&] { return cluster.jobs().at(before).at("status") == "running"; }, 30, "the first job runs",
             [&] { return cluster.diagnostics(); });
  // Elastic, 2 to 4 GPUs: it starts on the two left, and grows once the first job ends.
  const int elastic = submit_train(cluster, "elastic", 2, 400, 2, 4);
  auto iterations_at_four = [&] {
    int n = 0;
    for (const fs::path& file : cluster.logs(elastic, 3)) n += occurrences(slurp(file), "train: iteration");
    return n;
  };
  // Past a checkpoint on four GPUs, then a rigid job arrives and needs two.
  wait_until([&] { return iterations_at_four() >= 15; }, 60, "the elastic job runs on four GPUs",
             [&] { return cluster.diagnostics(); });
  const int after = submit_train(cluster, "after", 2, 600);  // outlasts the elastic job
  wait_until([&] { return cluster.all_finished(3); }, 120, "every job finished", [&] { return cluster.diagnostics(); });

  const std::vector<Life> processes = lives(cluster, elastic);
  const std::vector<int> launches = launch_ids(processes);
  REQUIRE(launches.size() == 3);
  const std::vector<Life> two = of_launch(processes, launches[0]), four = of_launch(processes, launches[1]),
                          shrunk = of_launch(processes, launches[2]);
  // What each process got: world size, GPUs, and TESSEL_RESUME=1 on a relaunch.
  auto check_launch = [](const std::vector<Life>& launch, int world, bool resume) {
    REQUIRE(launch.size() == static_cast<std::size_t>(world));
    std::set<int> ranks;
    for (const Life& life : launch) {
      INFO(describe(life));
      CHECK(life.world == world);
      CHECK(life.gpus.size() == static_cast<std::size_t>(world));  // one node: every rank sees the launch's GPUs
      CHECK(life.gpus == launch.front().gpus);
      CHECK(life.resume == resume);
      ranks.insert(life.rank);
    }
    CHECK(ranks.size() == launch.size());
  };
  check_launch(two, 2, false);
  check_launch(four, 4, true);
  check_launch(shrunk, 2, true);
  // Each relaunch resumes where the stopped launch checkpointed on SIGTERM.
  auto rank0 = [](const std::vector<Life>& launch) {
    return *std::find_if(launch.begin(), launch.end(), [](const Life& life) { return life.rank == 0; });
  };
  CHECK(rank0(two).from == 0);
  CHECK(rank0(two).checkpointed > 0);
  CHECK(rank0(four).from == rank0(two).checkpointed);
  CHECK(rank0(four).checkpointed > rank0(four).from);
  CHECK(rank0(shrunk).from == rank0(four).checkpointed);
  CHECK(rank0(shrunk).done);
  // The old launch's processes all exited before the new one's started.
  for (const auto& [old_launch, new_launch] : {std::pair{&two, &four}, std::pair{&four, &shrunk}}) {
    double last_end = 0, first_start = std::numeric_limits<double>::infinity();
    for (const Life& life : *old_launch) last_end = std::max(last_end, life.ended);
    for (const Life& life : *new_launch) first_start = std::min(first_start, life.started);
    CHECK(last_end < first_start);
  }
  // The rigid jobs' GPUs: the first job's were free before the elastic job
  // grew onto them, and the last job waited for those it shrank away from.
  check_lifetimes({{before, lives(cluster, before)}, {elastic, processes}, {after, lives(cluster, after)}});
  CHECK(finished_runs(cluster, elastic) == 1);

  const fs::path db = cluster.db();
  const std::string job = std::to_string(elastic);
  CHECK(query_text(db, "SELECT group_concat(outcome || ':' || resume, ' ') FROM (SELECT outcome, resume FROM "
                       "cluster_launches WHERE job_id = " + job + " ORDER BY launch_id)") ==
        "resized:0 resized:1 finished:1");
  CHECK(query_text(db, "SELECT group_concat(from_gpus || '>' || to_gpus, ' ') FROM (SELECT from_gpus, to_gpus FROM "
                       "resizes WHERE job_id = " + job + " ORDER BY time)") == "2>4 4>2");
  CHECK(count(db, "SELECT count(*) FROM decisions WHERE stage = 'elasticity' AND code = 'resize' AND job_id = " + job) ==
        2);
  CHECK(count(db, "SELECT count(*) FROM jobs WHERE status = 'finished' AND executed_work = total_work") == 3);
  CHECK(count(db, "SELECT count(*) FROM jobs WHERE job_id = " + job + " AND attempts = 1 AND preemptions = 0") == 1);
  CHECK(count(db, "SELECT count(*) FROM cluster_launches WHERE job_id <> " + job) == 2);  // the rigid ones, once each
}

TEST_CASE("a job that an elasticity plugin grows in the round that starts it is launched once, at its new size") {
  const TempDir policy_dir;
  LocalCluster cluster(elastic_settings(policy_dir));
  cluster.start_serve();
  cluster.add_agent("a1", 4);
  cluster.wait_for_nodes(1);
  // Placed on two GPUs, grown to the four free in the same round.
  const int elastic = submit_train(cluster, "elastic", 2, 50, 2, 4);
  wait_until([&] { return cluster.all_finished(1); }, 60, "the job finished", [&] { return cluster.diagnostics(); });

  const fs::path db = cluster.db();
  CHECK(count(db, "SELECT count(*) FROM resizes WHERE from_gpus = 2 AND to_gpus = 4") == 1);
  CHECK(query_text(db, "SELECT outcome || ':' || resume FROM cluster_launches") == "finished:0");
  CHECK(count(db, "SELECT count(*) FROM cluster_launches") == 1);
  const std::vector<Life> processes = lives(cluster, elastic);
  REQUIRE(processes.size() == 4);
  for (const Life& life : processes) {
    CHECK(life.world == 4);
    CHECK_FALSE(life.resume);
    CHECK(life.from == 0);
  }
  CHECK(finished_runs(cluster, elastic) == 1);
}

TEST_CASE("a black-holed agent's lease stops its jobs, the daemon requeues them, they finish elsewhere, never two "
          "launches at once; healed, the agent is accepted again") {
  // A node is down after a second of silence; its processes count as gone a
  // second, their 2 s grace and a second later.
  LocalCluster cluster(settings("", "heartbeat_seconds = 0.2\nnode_timeout_seconds = 1\n"));
  const auto relay = start_behind_relay(cluster, 2);
  const int first = submit_train(cluster, "first", 1, 300);  // 6 s each
  const int second = submit_train(cluster, "second", 1, 300);
  wait_until([&] {
    const json jobs = cluster.jobs();
    return jobs.at(first).at("iteration").get<double>() > 20 && jobs.at(second).at("iteration").get<double>() > 20;
  }, 30, "both jobs run on a1, past a checkpoint", [&] { return cluster.diagnostics(); });
  cluster.add_agent("a2", 2);
  cluster.wait_for_nodes(2);
  std::vector<pid_t> cut_off;
  {
    sql::Database database(cluster.db().string(), false);
    auto pids = database.prepare("SELECT pid FROM cluster_ranks WHERE node = 'a1' AND pid IS NOT NULL AND exit_code IS NULL");
    while (pids.step()) cut_off.push_back(static_cast<pid_t>(pids.integer(0)));
  }
  REQUIRE(cut_off.size() == 2);

  relay->black_hole();
  // The agent hears nothing: its lease runs out and it stops its jobs itself.
  wait_until([&] { return std::none_of(cut_off.begin(), cut_off.end(), process_alive); }, 15,
             "a1's job processes are gone", [&] { return cluster.diagnostics(); });
  CHECK(slurp(cluster.dir() / "a1.err").find("stopping 2 job processes") != std::string::npos);
  // The daemon hears nothing either: a1 is down, its jobs requeued, and they finish on a2.
  wait_until([&] { return cluster.all_finished(2); }, 60, "both jobs finished on a2",
             [&] { return cluster.diagnostics(); });
  CHECK(cluster.serve_log().find("node a1 is down: silent for") != std::string::npos);
  // Its old connection and the one it opened once its lease ended, which waits.
  CHECK(relay->accepted() == 2);

  relay->heal();
  wait_until([&] { return cluster.serve_log().find("node a1 is back") != std::string::npos; }, 30,
             "a1 is back", [&] { return cluster.diagnostics(); });
  cluster.wait_for_nodes(2);
  // Accepted as the same node, and it takes work: a job on all four GPUs.
  const int wide = submit_train(cluster, "wide", 4, 30);
  wait_until([&] { return cluster.all_finished(3); }, 60, "the job on both nodes finished",
             [&] { return cluster.diagnostics(); });
  CHECK(cluster.status().at("nodes").size() == 2);
  CHECK(cluster.serve_log().find("refused agent") == std::string::npos);
  CHECK(occurrences(slurp(cluster.dir() / "a1.err"), "registered a1") == 2);

  const fs::path db = cluster.db();
  for (const int job : {first, second}) {
    INFO("job " << job);
    const std::vector<Life> processes = lives(cluster, job);
    const std::vector<int> launches = launch_ids(processes);
    REQUIRE(launches.size() == 2);
    const Life cut = of_launch(processes, launches[0]).at(0), moved = of_launch(processes, launches[1]).at(0);
    CHECK(cut.node == "a1");
    CHECK(cut.checkpointed >= 20);  // stopped by its lease, it checkpointed
    CHECK(moved.node == "a2");
    CHECK(moved.resume);
    CHECK(moved.from == cut.checkpointed);
    CHECK(moved.done);
    CHECK(cut.ended < moved.started);
    CHECK(finished_runs(cluster, job) == 1);
    CHECK(query_text(db, "SELECT group_concat(outcome, ' ') FROM (SELECT outcome FROM cluster_launches WHERE job_id = " +
                             std::to_string(job) + " ORDER BY launch_id)") == "lost finished");
  }
  check_lifetimes({{first, lives(cluster, first)}, {second, lives(cluster, second)}, {wide, lives(cluster, wide)}});
  CHECK(count(db, "SELECT count(*) FROM decisions WHERE code = 'stop' AND reason = 'lost node a1'") == 2);
  CHECK(count(db, "SELECT count(*) FROM jobs WHERE status = 'finished' AND executed_work = total_work") == 3);
  CHECK(count(db, "SELECT count(DISTINCT node) FROM cluster_ranks JOIN cluster_launches USING (run_id, launch_id) "
                  "WHERE job_id = " + std::to_string(wide)) == 2);
}

TEST_CASE("a cut-off agent stops its jobs when its lease ends, not at its next heartbeat after") {
  // Beats 3 s apart and a 7 s lease: the last word the agent hears is the
  // ack of a beat, so a lease looked at only when beating would end with the
  // third beat after, 2 s late, past the second of margin the daemon allows
  // before it counts the processes as gone.
  LocalCluster cluster(settings("", "heartbeat_seconds = 3\nnode_timeout_seconds = 7\n"));
  const auto relay = start_behind_relay(cluster, 1);
  const int job = submit_train(cluster, "cut", 1, 100000);
  // Its progress came with a beat: from now on the agent hears only acks.
  wait_until([&] { return cluster.jobs().at(job).at("iteration").get<double>() > 0; }, 30, "the job runs",
             [&] { return cluster.diagnostics(); });
  relay->black_hole();
  wait_until([&] {
    const std::vector<Life> processes = lives(cluster, job);
    return !processes.empty() && processes.front().ended < std::numeric_limits<double>::infinity();
  }, 30, "the agent stops the job", [&] { return cluster.diagnostics(); });
  const double gap = lives(cluster, job).front().ended - relay->last_to_client();
  CHECK(gap > 6.9);  // not before it ends (the relay stamps its last write a moment after the agent may read it)
  CHECK(gap < 8);
}

TEST_CASE("an agent whose connection a partition left dead drops it when the scheduler has been silent a node "
          "timeout, and rejoins over a new one") {
  LocalCluster cluster(settings("", "heartbeat_seconds = 0.2\nnode_timeout_seconds = 1\n"));
  const auto relay = start_behind_relay(cluster, 1);
  relay->black_hole();
  wait_until([&] { return cluster.serve_log().find("node a1 is down") != std::string::npos; }, 30, "a1 is down",
             [&] { return cluster.diagnostics(); });
  // The connection it had stays open and silent, as behind a firewall that
  // forgot it; a new one gets through.
  relay->heal_new_only();
  wait_until([&] { return cluster.serve_log().find("node a1 is back") != std::string::npos; }, 30, "a1 is back",
             [&] { return cluster.diagnostics(); });
  CHECK(relay->accepted() == 2);  // the dead one, and the one it opened when the scheduler had been silent a timeout
  CHECK(slurp(cluster.dir() / "a1.err").find("lost the scheduler: silent for 1.000000 s") != std::string::npos);
  const int job = submit_train(cluster, "after", 1, 20);
  wait_until([&] { return cluster.all_finished(1); }, 30, "a job runs on a1", [&] { return cluster.diagnostics(); });
  CHECK(lives(cluster, job).at(0).node == "a1");
}
