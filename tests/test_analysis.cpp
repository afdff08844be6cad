// Reading results back: grouped reports, comparisons, explanations, plots.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "results/report.hpp"
#include "results/store.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

JobRecord finished_job(JobId id, double arrival, double start, double finish, double gpu_seconds) {
  JobRecord job;
  job.id = id;
  job.arrival = arrival;
  job.first_start = start;
  job.finish = finish;
  job.gpus = 1;
  job.gpu_seconds = gpu_seconds;
  job.status = "finished";
  return job;
}

// A database written by hand: two policies x two loads x two seeds, each
// run with two jobs whose JCTs are chosen so that averages are easy.
fs::path hand_database(const TempDir& dir) {
  const fs::path path = dir.path() / "hand.db";
  ResultsStore store(path.string());
  for (const char* policy : {"fifo", "las"})
    for (int load : {2, 4})
      for (int seed : {1, 2}) {
        RunInfo info;
        info.label = "exp";
        info.config = "[cluster]\n";
        info.axes = std::string(R"({"workload.jobs_per_hour":)") + std::to_string(load) +
                    R"(,"scheduler.allocation.plugin":")" + policy + R"(","seed":)" + std::to_string(seed) + "}";
        const std::int64_t run = store.begin_run(info);
        // JCT of job 0 = 100 * load * seed (+ 1000 for las); job 1 waits 10 s and runs 90 s.
        const double jct0 = 100.0 * load * seed + (std::string(policy) == "las" ? 1000 : 0);
        RunResults results;
        results.jobs = {finished_job(0, 0, 0, jct0, 50), finished_job(1, 0, 10, 100, 50)};
        results.capacity_gpu_seconds = 400;
        store.complete_run(run, results);
      }
  return path;
}

// A database written by hand for reports by VC: two policies x two seeds,
// each run with two jobs in VC "a", one in VC "b" and one with no VC, on a
// cluster that offered 1000 GPU-seconds. With s the seed:
//   fifo:  a: JCTs 100 and 100 + 100 s (the second waits 100 s);  b: JCT 300, no wait
//   share: a: JCTs 100 and 100, no wait;  b: JCT 300 + 100 s (waits 100 s)
//   both:  no VC: JCT 40
fs::path vc_database(const TempDir& dir) {
  const fs::path path = dir.path() / "vc.db";
  ResultsStore store(path.string());
  for (const char* policy : {"fifo", "share"})
    for (int seed : {1, 2}) {
      const bool fifo = std::string(policy) == "fifo";
      RunInfo info;
      info.label = "exp";
      info.config = "[cluster]\n";
      info.axes = std::string(R"({"scheduler.allocation":")") + policy + R"(","seed":)" + std::to_string(seed) + "}";
      const std::int64_t run = store.begin_run(info);
      const double wait = 100.0 * seed;
      RunResults results;
      results.jobs = {finished_job(0, 0, 0, 100, 100),
                      fifo ? finished_job(1, 0, wait, wait + 100, 100) : finished_job(1, 0, 0, 100, 100),
                      fifo ? finished_job(2, 50, 50, 350, 300) : finished_job(2, 50, 50 + wait, 350 + wait, 300),
                      finished_job(3, 0, 0, 40, 40)};
      results.jobs[0].vc = results.jobs[1].vc = "a";
      results.jobs[2].vc = "b";
      results.capacity_gpu_seconds = 1000;
      store.complete_run(run, results);
    }
  return path;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("report --by averages a sweep's seeds into one row per series and value") {
  TempDir dir;
  const fs::path db = hand_database(dir);
  const auto result = run_tessel({"report", db.string(), "--by", "workload.jobs_per_hour", "--format", "csv"});
  REQUIRE(result.code == 0);
  // fifo at load 2: JCTs (200, 100) and (400, 100): run averages 150 and 250, mean 200.
  // las at load 4: (1400, 100) and (1800, 100): 750 and 950, mean 850.
  std::istringstream lines(result.out);
  std::string header, fifo2, fifo4, las2, las4;
  std::getline(lines, header);
  std::getline(lines, fifo2);
  std::getline(lines, fifo4);
  std::getline(lines, las2);
  std::getline(lines, las4);
  CHECK(header.starts_with("series,workload.jobs_per_hour,runs,jobs,finished,unfinished,avg_jct_s,"));
  CHECK(fifo2.starts_with("exp plugin=fifo,2,2,2,2,0,200.000,"));
  CHECK(fifo4.starts_with("exp plugin=fifo,4,2,2,2,0,350.000,"));
  CHECK(las2.starts_with("exp plugin=las,2,2,2,2,0,700.000,"));
  CHECK(las4.starts_with("exp plugin=las,4,2,2,2,0,850.000,"));
  // Utilization: 100 GPU-seconds of 400 offered in every run.
  CHECK(fifo2.find(",0.250000,") != std::string::npos);

  const auto missing = run_tessel({"report", db.string(), "--by", "jobs_per_hour"});
  CHECK(missing.code == 2);
  CHECK(missing.err == "tessel: no complete run has axis 'jobs_per_hour' (axes: workload.jobs_per_hour, "
                       "scheduler.allocation.plugin, seed)\n");
}

TEST_CASE("report --group vc gives each VC of a run the run's figures, from its own jobs") {
  TempDir dir;
  const fs::path db = vc_database(dir);
  auto result = run_tessel({"report", db.string(), "--group", "vc", "--run", "1", "--format", "csv"});
  REQUIRE(result.code == 0);
  const auto lines = lines_of(result.out);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] == "run,label,axes,status,vc,jobs,finished,unfinished,avg_jct_s,p50_jct_s,p95_jct_s,p99_jct_s,"
                    "avg_queueing_delay_s,makespan_s,gpu_utilization,gpu_allocation,preemptions,avg_jct_bound_s");
  // fifo, seed 1. No VC: one job of 40 s. VC a: JCTs 100 and 200, waits 0 and 100, GPU-seconds 200 of 1000,
  // makespan 200. VC b: 300 s from 50 to 350, GPU-seconds 300.
  CHECK(lines[1] == "1,exp,allocation=fifo seed=1,complete,-,1,1,0,40.000,40.000,40.000,40.000,0.000,40.000,0.040000,0.000000,0,40.000");
  CHECK(lines[2] ==
        "1,exp,allocation=fifo seed=1,complete,a,2,2,0,150.000,150.000,195.000,199.000,50.000,200.000,0.200000,0.000000,0,150.000");
  CHECK(lines[3] ==
        "1,exp,allocation=fifo seed=1,complete,b,1,1,0,300.000,300.000,300.000,300.000,0.000,300.000,0.300000,0.000000,0,300.000");

  result = run_tessel({"report", db.string(), "--group", "vc", "--run", "3"});  // a table: share, seed 1
  REQUIRE(result.code == 0);
  const auto table = lines_of(result.out);
  REQUIRE(table.size() == 4);
  CHECK(table[0].find("  status    vc  jobs  finished  avg JCT") != std::string::npos);
  CHECK(table[1].find("complete  -      1         1     40 s") != std::string::npos);
  CHECK(table[3].find("complete  b      1         1    400 s") != std::string::npos);  // seed 1: waits 100 s

  result = run_tessel({"report", db.string(), "--group", "vc", "--run", "2", "--format", "json"});
  REQUIRE(result.code == 0);
  const auto json = nlohmann::json::parse(result.out);
  REQUIRE(json.size() == 3);
  CHECK(json[1]["vc"] == "a");
  CHECK(json[1]["avg_jct_s"] == 200.0);  // seed 2: JCTs 100 and 300
  CHECK(json[0]["vc"] == "");

  CHECK(run_tessel({"report", db.string(), "--group", "tenant"}).code == 2);
}

TEST_CASE("report --by with --group vc averages each VC over a series' seeds") {
  TempDir dir;
  const fs::path db = vc_database(dir);
  const auto result =
      run_tessel({"report", db.string(), "--by", "scheduler.allocation", "--group", "vc", "--format", "csv"});
  REQUIRE(result.code == 0);
  const auto lines = lines_of(result.out);
  REQUIRE(lines.size() == 7);
  CHECK(lines[0].starts_with("series,scheduler.allocation,vc,runs,jobs,finished,unfinished,avg_jct_s,"));
  CHECK(lines[1] == "exp,fifo,-,2,1,1,0,40.000,40.000,40.000,40.000,0.000,40.000,0.040000,0.000000,0,40.000");
  // fifo, a: run averages 150 (seed 1) and 200 (seed 2); waits 50 and 100; makespans 200 and 300.
  CHECK(lines[2] == "exp,fifo,a,2,2,2,0,175.000,175.000,242.500,248.500,75.000,250.000,0.200000,0.000000,0,175.000");
  CHECK(lines[3] == "exp,fifo,b,2,1,1,0,300.000,300.000,300.000,300.000,0.000,300.000,0.300000,0.000000,0,300.000");
  CHECK(lines[4] == "exp,share,-,2,1,1,0,40.000,40.000,40.000,40.000,0.000,40.000,0.040000,0.000000,0,40.000");
  CHECK(lines[5] == "exp,share,a,2,2,2,0,100.000,100.000,100.000,100.000,0.000,100.000,0.200000,0.000000,0,100.000");
  // share, b: JCTs 400 and 500, waits 100 and 200.
  CHECK(lines[6] == "exp,share,b,2,1,1,0,450.000,450.000,450.000,450.000,150.000,450.000,0.300000,0.000000,0,450.000");
}

TEST_CASE("report --over averages over another axis too, as over seeds") {
  TempDir dir;
  const fs::path db = hand_database(dir);
  const auto result = run_tessel({"report", db.string(), "--by", "workload.jobs_per_hour", "--over",
                                  "scheduler.allocation.plugin", "--format", "csv"});
  REQUIRE(result.code == 0);
  // Load 2: run averages 150, 250 (fifo) and 650, 750 (las): mean 450.
  // Load 4: 250, 450 and 750, 950: mean 600.
  std::istringstream lines(result.out);
  std::string header, load2, load4, rest;
  std::getline(lines, header);
  std::getline(lines, load2);
  std::getline(lines, load4);
  CHECK(load2.starts_with("exp,2,4,2,2,0,450.000,"));
  CHECK(load4.starts_with("exp,4,4,2,2,0,600.000,"));
  CHECK_FALSE(std::getline(lines, rest));

  const auto missing = run_tessel({"report", db.string(), "--by", "workload.jobs_per_hour", "--over", "policy"});
  CHECK(missing.code == 2);
  CHECK(missing.err == "tessel: no complete run has axis 'policy' to average over (axes: workload.jobs_per_hour, "
                       "scheduler.allocation.plugin, seed)\n");
}

TEST_CASE("compare puts two runs side by side with ratios") {
  TempDir dir;
  const fs::path db = hand_database(dir);
  const auto result = run_tessel({"compare", db.string(), "1", "5"});  // fifo load 2 seed 1 vs las load 2 seed 1
  REQUIRE(result.code == 0);
  CHECK(result.out.find("A: run 1 (exp jobs_per_hour=2 plugin=fifo seed=1)") != std::string::npos);
  std::istringstream lines(result.out);
  std::string line;
  bool found = false;
  while (std::getline(lines, line))
    if (line.starts_with("avg JCT")) {
      found = true;
      CHECK(line.find("150 s") != std::string::npos);   // (200 + 100) / 2
      CHECK(line.find("650 s") != std::string::npos);   // (1200 + 100) / 2
      CHECK(line.ends_with("4.33"));
    }
  CHECK(found);
  CHECK(run_tessel({"compare", db.string(), "1", "99"}).code == 2);

  // A run stopped early stored no rows: its zeros once read as results.
  {
    ResultsStore store(db.string());
    RunInfo info;
    info.config = "[cluster]\n";
    store.abandon_run(store.begin_run(info), "interrupted", "stopped by the user");
  }
  const auto stopped = run_tessel({"compare", db.string(), "1", "9"});
  CHECK(stopped.code == 2);
  CHECK(stopped.err == "tessel: " + db.string() +
                           ": run 9 is interrupted and stored no results to compare (stopped by the user)\n");
}

// Each was once taken: a run reported twice, an empty window, a job id
// that wrapped to 4294967291.
TEST_CASE("report, plot and explain refuse arguments that contradict themselves") {
  TempDir dir;
  const fs::path db = hand_database(dir);
  for (const char* command : {"report", "plot"}) {
    const auto twice = run_tessel({command, db.string(), "--run", "1", "--run", "1"}, dir.path());
    CHECK(twice.code == 2);
    CHECK(twice.err == "tessel: --run 1 is given twice\n");
  }
  const auto window = run_tessel({"explain", db.string(), "0", "--run", "1", "--from", "100", "--to", "50"});
  CHECK(window.code == 2);
  CHECK(window.err == "tessel: --from 100.000000 is after --to 50.000000: no time is in both\n");
  const auto nan = run_tessel({"explain", db.string(), "0", "--run", "1", "--from", "nan"});
  CHECK(nan.code == 2);
  CHECK(nan.err == "tessel: --from: not a time: nan\n");
  const auto negative = run_tessel({"explain", db.string(), "-5", "--run", "1"});
  CHECK(negative.code == 2);
  CHECK(negative.err.find("job: Value -5 not in range") != std::string::npos);
}

TEST_CASE("explain tells why a job waited, decision by decision") {
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,2,250\n0,4,100\n50,2,120\n");
  dir.write("e.toml", R"([cluster]
nodes = 1
gpus_per_node = 4
[workload]
kind = "csv"
path = "trace.csv"
[scheduler]
round_seconds = 100
allocation = { plugin = "fifo" }
placement = { plugin = "first_fit" }
[output]
database = "e.db"
decisions = true
)");
  REQUIRE(run_tessel({"run", "e.toml", "-q"}, dir.path()).code == 0);
  const auto result = run_tessel({"explain", "e.db", "1"}, dir.path());
  REQUIRE(result.code == 0);
  CHECK(result.out ==
        "job 1 in run 1 (e): 4 GPUs, finished\n"
        "  arrived 0 s, first started 300 s (waited 300 s), ended 400 s (JCT 400 s), preempted 0 times\n"
        "    0 s  admission   accept_all  admit  accept_all admits every job\n"
        "    0 s  allocation  fifo        grant  arrived at 0 s; served in arrival order\n"
        "    0 s  placement   first_fit   wait   needs 4 GPUs, 2 free\n"
        "  300 s  placement   first_fit   place  first free GPUs, on 1 node(s)\n");

  // Filters: a window of time, one stage.
  const auto window = run_tessel({"explain", "e.db", "1", "--from", "100", "--to", "300"}, dir.path());
  CHECK(window.out.ends_with("  300 s  placement   first_fit  place  first free GPUs, on 1 node(s)\n"));
  CHECK(window.out.find("admission") == std::string::npos);
  const auto stage = run_tessel({"explain", "e.db", "1", "--stage", "allocation"}, dir.path());
  CHECK(stage.out.ends_with("  0 s  allocation  fifo  grant  arrived at 0 s; served in arrival order\n"));
  CHECK(run_tessel({"explain", "e.db", "1", "--stage", "elasticity"}, dir.path()).out.ends_with(
      "none of its 4 recorded decisions is in the window and stage asked for\n"));
  CHECK(run_tessel({"explain", "e.db", "1", "--stage", "alocation"}, dir.path()).code == 2);

  CHECK(run_tessel({"explain", "e.db", "9"}, dir.path()).err == "tessel: run 1 has no job 9 (ids 0..2)\n");
  REQUIRE(run_tessel({"run", "e.toml", "-q", "--set", "output.decisions=false"}, dir.path()).code == 0);
  CHECK(run_tessel({"explain", "e.db", "1"}, dir.path()).out.ends_with(
      "no decisions were recorded for this run; rerun it with --set output.decisions=true\n"));
}

TEST_CASE("a decision is recorded when it changes, not when only its numbers move") {
  TempDir dir;
  // LAS's reason names the service attained, which grows every round.
  dir.write("trace.csv", "arrival,gpus,duration\n0,4,3000\n0,4,3000\n");
  dir.write("e.toml", R"([cluster]
nodes = 1
gpus_per_node = 4
[workload]
kind = "csv"
path = "trace.csv"
[scheduler]
round_seconds = 100
allocation = { plugin = "las" }
placement = { plugin = "first_fit" }
[output]
database = "e.db"
decisions = true
)");
  REQUIRE(run_tessel({"run", "e.toml", "-q"}, dir.path()).code == 0);
  // Two jobs taking turns on 4 GPUs for 60 rounds: each turn is a change
  // (place, wait, preempt), each round of the same decision is not.
  const fs::path db = dir.path() / "e.db";
  // The run's events: its rounds, and the jobs' ends between them.
  CHECK(count(db, "SELECT events FROM runs") >= 55);
  CHECK(count(db, "SELECT count(*) FROM decisions WHERE stage = 2") <= 4);  // allocation: one grant each, kept
}

TEST_CASE("plot writes well-formed SVG and PNG files with labelled axes") {
  TempDir dir;
  const fs::path db = hand_database(dir);
  auto result = run_tessel({"plot", db.string(), "-o", "cdf.svg"}, dir.path());
  REQUIRE(result.code == 0);
  std::string svg = slurp(dir.path() / "cdf.svg");
  CHECK(svg.size() > 1000);
  CHECK(svg.find("<svg") != std::string::npos);
  CHECK(svg.rfind("</svg>") != std::string::npos);
  CHECK(svg.find("job completion time (hours)") != std::string::npos);
  CHECK(svg.find("run 5 exp jobs_per_hour=2 plugin=las seed=1") != std::string::npos);  // the legend

  result = run_tessel({"plot", db.string(), "--kind", "metric", "--by", "workload.jobs_per_hour", "--metric",
                       "p95_jct_s", "-o", "metric.svg"},
                      dir.path());
  REQUIRE(result.code == 0);
  svg = slurp(dir.path() / "metric.svg");
  CHECK(svg.find("p95 JCT (hours)") != std::string::npos);
  CHECK(svg.find("exp plugin=fifo") != std::string::npos);
  CHECK(svg.find("exp plugin=las") != std::string::npos);

  result = run_tessel({"plot", db.string(), "--kind", "metric", "--by", "scheduler.allocation.plugin", "-o",
                       "categories.png"},
                      dir.path());
  REQUIRE(result.code == 0);
  CHECK(slurp(dir.path() / "categories.png").starts_with("\x89PNG"));

  result = run_tessel({"plot", db.string(), "--kind", "metric", "--by", "workload.jobs_per_hour", "--metric",
                       "avg_jct", "-o", "x.svg"},
                      dir.path());
  CHECK(result.code == 2);
  CHECK(result.err.starts_with("tessel: unknown metric 'avg_jct' (valid: jobs, finished, unfinished, avg_jct_s,"));
  CHECK(run_tessel({"plot", db.string(), "-o", "x.pdf"}, dir.path()).err ==
        "tessel: plot output 'x.pdf' must end in .svg or .png\n");
}

TEST_CASE("plot shows occupancy and the queue over a simulated run") {
  TempDir dir;
  const auto run = run_tessel({"run", (source_root() / "experiments/quickstart.toml").string(), "--db", "q.db",
                               "-q", "--set", "workload.jobs=80"},
                              dir.path());
  REQUIRE(run.code == 0);
  const auto result = run_tessel({"plot", "q.db", "--kind", "occupancy"}, dir.path());
  REQUIRE(result.code == 0);
  CHECK(result.out == "wrote q-occupancy.svg\n");
  const std::string svg = slurp(dir.path() / "q-occupancy.svg");
  CHECK(svg.find("time (hours)") != std::string::npos);
  CHECK(svg.find("busy GPUs") != std::string::npos);
  CHECK(svg.find("waiting jobs") != std::string::npos);
}
