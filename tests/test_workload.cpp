// Workload transforms, profile assignment and pricing, on any trace.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "config/experiment.hpp"
#include "experiment_runner.hpp"
#include "support.hpp"
#include "common/text.hpp"
#include "workloads/workload.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

const char* kTrace =
    "arrival,gpus,duration,vc,tenant,model\n"
    "0,1,100,a,alice,ncf\n"
    "50,2,200,b,bob,bert\n"
    "120,4,300,a,bob,bert\n"
    "400,1,400,c,alice,ncf\n"
    "900,8,500,a,carol,imagenet\n";

Workload build(const TempDir& dir, const std::string& extra, const char* trace = kTrace) {
  dir.write("trace.csv", trace);
  const std::string toml = R"([cluster]
nodes = 2
gpus_per_node = 8
[workload]
kind = "csv"
path = "trace.csv"
)" + extra + R"(
[scheduler]
allocation = { plugin = "fifo" }
placement = { plugin = "first_fit" }
)";
  const ExperimentConfig config = load_experiment(dir.write("w.toml", toml));
  return build_workload(config.workload, ClusterState(config.cluster.nodes));
}

std::vector<double> arrivals(const Workload& w) {
  std::vector<double> out;
  for (const JobSpec& job : w.jobs) out.push_back(job.arrival);
  return out;
}

}  // namespace

TEST_CASE("without transforms a trace is priced on the linear model") {
  TempDir dir;
  const Workload w = build(dir, "");
  REQUIRE(w.jobs.size() == 5);
  CHECK(arrivals(w) == std::vector<double>{0, 50, 120, 400, 900});
  CHECK(w.jobs[2].total_work == 4 * 300);  // GPU-seconds
  CHECK(w.jobs[2].vc == "a");
  CHECK(w.jobs[1].tenant == "bob");
  CHECK(w.notes.empty());
}

TEST_CASE("a time window keeps the jobs inside it and restarts the clock") {
  TempDir dir;
  const Workload w = build(dir, "window = [50, 400]");
  CHECK(arrivals(w) == std::vector<double>{0, 70});
  CHECK(w.jobs[0].total_work == 2 * 200);
  CHECK(w.notes == std::vector<std::string>{"window: kept 2 of 5 jobs"});
}

TEST_CASE("virtual clusters and users can be selected") {
  TempDir dir;
  CHECK(arrivals(build(dir, "vcs = [\"a\"]")) == std::vector<double>{0, 120, 900});
  CHECK(arrivals(build(dir, "tenants = [\"alice\", \"carol\"]")) == std::vector<double>{0, 400, 900});
  CHECK(build(dir, "vcs = [\"a\", \"c\"]\ntenants = [\"alice\"]").jobs.size() == 2);
}

TEST_CASE("max_jobs keeps the first jobs by arrival") {
  TempDir dir;
  const Workload w = build(dir, "max_jobs = 3");
  CHECK(arrivals(w) == std::vector<double>{0, 50, 120});
  CHECK(w.notes == std::vector<std::string>{"max_jobs: kept the first 3 of 5 jobs"});
}

TEST_CASE("Poisson re-drawing keeps sizes, durations and order") {
  TempDir dir;
  const Workload w = build(dir, "poisson_jobs_per_hour = 36\nseed = 3");
  REQUIRE(w.jobs.size() == 5);
  CHECK(w.jobs[0].arrival == 0);
  for (std::size_t i = 1; i < 5; ++i) CHECK(w.jobs[i].arrival > w.jobs[i - 1].arrival);
  CHECK(arrivals(w) != std::vector<double>{0, 50, 120, 400, 900});
  CHECK(w.jobs[4].gpus == 8);
  CHECK(w.jobs[4].total_work == 8 * 500);
  CHECK(arrivals(build(dir, "poisson_jobs_per_hour = 36\nseed = 3")) == arrivals(w));
  CHECK(arrivals(build(dir, "poisson_jobs_per_hour = 36\nseed = 4")) != arrivals(w));
}

TEST_CASE("load and duration scaling") {
  TempDir dir;
  const Workload w = build(dir, "arrival_rate_scale = 2\nduration_scale = 0.5");
  CHECK(arrivals(w) == std::vector<double>{0, 25, 60, 200, 450});
  CHECK(w.jobs[2].total_work == 4 * 150);
}

TEST_CASE("jobs can be made elastic around their request") {
  TempDir dir;
  const Workload w = build(dir, "elastic_min_gpus = 2\nelastic_max_gpus = 4");
  std::vector<std::pair<int, int>> ranges;
  for (const JobSpec& job : w.jobs) ranges.emplace_back(job.min_gpus, job.max_gpus);
  CHECK(ranges == std::vector<std::pair<int, int>>{{1, 4}, {2, 4}, {2, 4}, {1, 4}, {2, 8}});
  CHECK(w.jobs[0].elastic());
  CHECK(w.jobs[4].gpus == 8);
}

TEST_CASE("only the jobs of some models can be made elastic") {
  TempDir dir;
  const Workload w = build(dir, "elastic_min_gpus = 1\nelastic_max_gpus = 16\nelastic_models = [\"bert\", \"imagenet\"]");
  std::vector<std::pair<int, int>> ranges;
  for (const JobSpec& job : w.jobs) ranges.emplace_back(job.min_gpus, job.max_gpus);
  CHECK(ranges == std::vector<std::pair<int, int>>{{1, 1}, {1, 16}, {1, 16}, {1, 1}, {1, 16}});
}

std::vector<int> gpu_counts(const Workload& w) {
  std::vector<int> out;
  for (const JobSpec& job : w.jobs) out.push_back(job.gpus);
  return out;
}

double gpu_demand(const Workload& w) {
  double milli = 0;
  for (const JobSpec& job : w.jobs) milli += job.gpus * job.gpu_milli;
  return milli / 1000;
}

TEST_CASE("shuffle permutes the jobs over the same arrival times, by the seed") {
  TempDir dir;
  const Workload w = build(dir, "shuffle = true\nseed = 3");
  CHECK(arrivals(w) == std::vector<double>{0, 50, 120, 400, 900});
  std::vector<int> sizes = gpu_counts(w);
  CHECK(sizes != std::vector<int>{1, 2, 4, 1, 8});  // seed 3 moves them
  std::sort(sizes.begin(), sizes.end());
  CHECK(sizes == std::vector<int>{1, 1, 2, 4, 8});
  for (const JobSpec& job : w.jobs)  // durations travel with their jobs
    if (job.gpus == 8) CHECK(job.total_work == 8 * 500);
  CHECK(gpu_counts(build(dir, "shuffle = true\nseed = 3")) == gpu_counts(w));
  CHECK(w.notes.empty());
}

TEST_CASE("gpu_demand_ratio resamples the trace to a multiple of the cluster's GPUs") {
  // 16 GPUs. Three jobs of half a GPU ask for 1.5; at ratio 0.5 they must
  // ask for 8: 13 copies are appended (16 jobs, 8 GPUs), and the next would
  // overshoot. The copies arrive with the last job.
  TempDir dir;
  const char* halves = "arrival,gpus,duration,gpu_milli,name\n0,1,100,500,a\n10,1,100,500,b\n20,1,100,500,c\n";
  Workload w = build(dir, "gpu_demand_ratio = 0.5", halves);
  REQUIRE(w.jobs.size() == 16);
  CHECK(gpu_demand(w) == 8);
  CHECK(w.jobs[3].arrival == 20);
  CHECK(w.jobs[15].arrival == 20);
  CHECK(w.jobs[3].name.find("-resampled-1") != std::string::npos);
  CHECK(w.notes == std::vector<std::string>{"gpu_demand_ratio: added 13 jobs drawn from the 3 of the trace"});

  // The five-job trace asks for exactly 16 GPUs: ratio 1 leaves it alone.
  w = build(dir, "gpu_demand_ratio = 1");
  CHECK(gpu_counts(w) == std::vector<int>{1, 2, 4, 1, 8});
  CHECK(w.notes.empty());
  // Ratio 2 (32 GPUs): copies are appended while the next fits, so the
  // demand ends within one job (at most 8 GPUs) of 32.
  w = build(dir, "gpu_demand_ratio = 2\nseed = 5");
  CHECK(gpu_demand(w) <= 32);
  CHECK(gpu_demand(w) > 24);
  const std::vector<int> sizes = gpu_counts(w);
  CHECK(std::vector<int>(sizes.begin(), sizes.begin() + 5) == std::vector<int>{1, 2, 4, 1, 8});
  // Ratio 0.5 (8 GPUs): random jobs are dropped until the rest fit; the
  // survivors keep their order.
  w = build(dir, "gpu_demand_ratio = 0.5\nseed = 5");
  CHECK(gpu_demand(w) <= 8);
  CHECK(std::is_sorted(w.jobs.begin(), w.jobs.end(),
                       [](const JobSpec& a, const JobSpec& b) { return a.arrival < b.arrival; }));
  CHECK(w.notes.size() == 1);
  CHECK(w.notes[0].starts_with("gpu_demand_ratio: kept "));
}

TEST_CASE("tracking marks a window of job ids") {
  TempDir dir;
  const Workload w = build(dir, "track = [1, 3]");
  std::vector<bool> tracked;
  for (const JobSpec& job : w.jobs) tracked.push_back(job.tracked);
  CHECK(tracked == std::vector<bool>{false, true, true, false, false});
}

TEST_CASE("transform mistakes are located") {
  TempDir dir;
  CHECK_THROWS_WITH_AS(build(dir, "window = [400, 50]"),
                       (dir.path() / "w.toml").string().append(":7:10: 'window' in [workload] must be [start, end) seconds with start < end").c_str(),
                       ConfigError);
  CHECK_THROWS_WITH_AS(build(dir, "gpu_demand_ratio = 0"),
                       (dir.path() / "w.toml").string().append(":7:20: 'gpu_demand_ratio' in [workload] must be > 0")
                           .c_str(),
                       ConfigError);
  CHECK_THROWS_WITH_AS(build(dir, "reference_gpu_type = \"a100\""),
                       "[workload] reference_gpu_type 'a100' is not a GPU type of the cluster", UserError);
}

// ------------------------------------------------- random profiles

namespace {

// Solo was measured on one GPU only (like Gavel's A3C); Duo on 1 and 2.
const char* kProfileTable = R"json({
  "v100": {"('Solo', 1)": {"null": 2.0}, "('Duo', 1)": {"null": 4.0}, "('Duo', 2)": {"null": 6.0}}
})json";

// `jobs` synthetic jobs at time 0 (by default 4,000, half of them on 2
// GPUs), given profiles of the table above.
Workload synthetic_profiles(const TempDir& dir, const std::string& extra, int jobs = 4000,
                            const std::string& gpu_counts = "[1, 2]") {
  dir.write("throughputs.json", kProfileTable);
  const std::string toml = R"([cluster]
nodes = 2
gpus_per_node = 8
[workload]
kind = "synthetic"
jobs = )" + std::to_string(jobs) + R"(
jobs_per_hour = 0
gpu_counts = )" + gpu_counts + R"(
gpu_weights = )" + (gpu_counts == "[1]" ? "[1]" : "[1, 1]") + R"(
model = { name = "gavel-table", path = "throughputs.json" }
)" + extra + R"(
[scheduler]
allocation = { plugin = "fifo" }
placement = { plugin = "first_fit" }
)";
  const ExperimentConfig config = load_experiment(dir.write("w.toml", toml));
  return build_workload(config.workload, ClusterState(config.cluster.nodes));
}

// Each job's profile, in order: S for Solo, D for Duo.
std::string models(const Workload& w) {
  std::string out;
  for (const JobSpec& job : w.jobs) out += job.model == "Solo" ? 'S' : 'D';
  return out;
}

// Jobs of `gpus` GPUs with profile `model`.
std::size_t count(const Workload& w, int gpus, const std::string& model) {
  std::size_t n = 0;
  for (const JobSpec& job : w.jobs) n += job.gpus == gpus && job.model == model;
  return n;
}

}  // namespace

TEST_CASE("a multi-GPU job is given only profiles measured on several GPUs, as Gavel's generator does") {
  TempDir dir;
  const Workload w = synthetic_profiles(dir, "");
  const std::size_t one = count(w, 1, "Solo") + count(w, 1, "Duo");
  const std::size_t two = count(w, 2, "Duo");
  CHECK(one + two == 4000);
  CHECK(count(w, 2, "Solo") == 0);
  // One-GPU jobs draw both profiles, equally likely: 1,000 expected of each
  // among about 2,000 (binomial sd 22).
  CHECK(count(w, 1, "Solo") == doctest::Approx(one / 2.0).epsilon(0.1));
  CHECK(w.notes.back() == "gave 4,000 jobs a random profile of 'gavel-table'");
}

TEST_CASE("profile_weights draws profiles in proportion to their weights") {
  TempDir dir;
  // Solo 3 : Duo 1 for one-GPU jobs; two-GPU jobs can only be Duo.
  const Workload w = synthetic_profiles(dir, "profile_weights = { Solo = 3, Duo = 1 }");
  const std::size_t one = count(w, 1, "Solo") + count(w, 1, "Duo");
  CHECK(count(w, 1, "Solo") == doctest::Approx(0.75 * one).epsilon(0.05));
  CHECK(count(w, 2, "Solo") == 0);
  CHECK(w.notes.back() == "gave 4,000 jobs a random profile of 'gavel-table', drawn by profile_weights");

  // A weight of 0 is never drawn; with no profile left for 2-GPU jobs they
  // get one that does not suit them, and a note says so.
  const Workload only_solo = synthetic_profiles(dir, "profile_weights = { Solo = 1, Duo = 0 }");
  CHECK(count(only_solo, 1, "Duo") + count(only_solo, 2, "Duo") == 0);
  const std::size_t two = count(only_solo, 2, "Solo");
  CHECK(two > 0);
  CHECK(only_solo.notes.back() == count_text(two) + " of them have a GPU count no profile suits; they got any profile");
}

TEST_CASE("profile_weights mistakes are located") {
  TempDir dir;
  const std::string file = (dir.path() / "w.toml").string();
  CHECK_THROWS_WITH_AS(synthetic_profiles(dir, "profile_weights = { Trio = 1 }"),
                       (file + ":11:28: throughput model 'gavel-table' has no profile 'Trio' (valid: Duo, Solo)").c_str(),
                       ConfigError);
  CHECK_THROWS_WITH_AS(synthetic_profiles(dir, "profile_weights = { Solo = 0 }"),
                       (file + ":11:19: 'profile_weights' in [workload] needs at least one positive weight").c_str(),
                       ConfigError);
}

// ------------------------------------------------- jobs without end

namespace {

// A small cluster swamped by synthetic jobs, as Blox's Figures 6, 7, 12 and
// 13 are: two 4-GPU nodes, 1- and 2-GPU jobs at 4 an hour, jobs 10..19 tracked.
std::string endless_experiment(const std::string& jobs, const std::string& extra = "") {
  return R"([cluster]
nodes = 2
gpus_per_node = 4
[workload]
kind = "synthetic"
jobs = )" + jobs + R"(
jobs_per_hour = 4
gpu_counts = [1, 2]
gpu_weights = [3, 1]
track = [10, 20]
seed = 7
elastic_max_gpus = 4
)" + extra + R"(
[scheduler]
allocation = { plugin = "fifo" }
placement = { plugin = "first_fit" }
)";
}

Workload endless_workload(const TempDir& dir, const std::string& jobs, const std::string& extra = "") {
  const ExperimentConfig config = load_experiment(dir.write("w.toml", endless_experiment(jobs, extra)));
  return build_workload(config.workload, ClusterState(config.cluster.nodes));
}

}  // namespace

TEST_CASE("a workload without end makes, one at a time, the jobs a count would") {
  TempDir dir;
  const Workload counted = endless_workload(dir, "300");
  Workload endless = endless_workload(dir, "\"until_tracked_done\"");
  REQUIRE(endless.stream);
  CHECK(endless.jobs.empty());
  CHECK(endless.stream->track() == std::pair<JobId, JobId>{10, 20});
  CHECK(endless.notes == std::vector<std::string>{"jobs are generated until the tracked ones (ids 10 to 19) are done"});
  for (const JobSpec& expected : counted.jobs) {
    const JobSpec job = endless.stream->next();
    REQUIRE(job.id == expected.id);
    CHECK(job.arrival == expected.arrival);
    CHECK(job.gpus == expected.gpus);
    CHECK(job.max_gpus == 4);  // the per-job transforms apply
    CHECK(job.total_work == expected.total_work);
    CHECK(job.tracked == (job.id >= 10 && job.id < 20));
  }
  // A copy goes on with the same jobs, from where the original is.
  JobStream copy = *endless.stream;
  const JobSpec a = endless.stream->next(), b = copy.next();
  CHECK(a.id == 300);
  CHECK(b.id == 300);
  CHECK(a.arrival == b.arrival);
  CHECK(a.total_work == b.total_work);
}

TEST_CASE("a workload without end stops making jobs exactly when the tracked jobs are done") {
  TempDir dir;
  const RunResults results = simulate(dir, endless_experiment("\"until_tracked_done\""));
  double last_tracked_finish = 0;
  std::size_t tracked = 0;
  for (const JobRecord& job : results.jobs)
    if (job.tracked) {
      ++tracked;
      REQUIRE(job.status == "finished");
      last_tracked_finish = std::max(last_tracked_finish, *job.finish);
    }
  CHECK(tracked == 10);
  CHECK(results.end_time == last_tracked_finish);
  // Jobs after the window went on arriving until then, and waiting: the
  // cluster is swamped. The next job the generator would make comes later.
  const std::size_t arrived = results.jobs.size();
  CHECK(arrived > 40);
  for (const JobRecord& job : results.jobs) CHECK(job.arrival <= last_tracked_finish);
  std::size_t unfinished = 0;
  for (const JobRecord& job : results.jobs) unfinished += job.status != "finished";
  CHECK(unfinished > 0);
  Workload stream = endless_workload(dir, "\"until_tracked_done\"");
  JobSpec next;
  for (std::size_t i = 0; i <= arrived; ++i) next = stream.stream->next();
  CHECK(next.id == arrived);
  CHECK(next.arrival > last_tracked_finish);
  CHECK(results.note.find("the run ended when the tracked jobs were done, after " + std::to_string(arrived) +
                          " jobs arrived") != std::string::npos);
  // The tracked jobs fare as in a long enough counted run, whose arrivals go
  // on past their end: what arrives after that cannot touch them.
  const RunResults counted = simulate(dir, endless_experiment(std::to_string(arrived + 50)), "counted.toml");
  for (JobId id = 10; id < 20; ++id) CHECK(counted.jobs[id].finish == results.jobs[id].finish);
}

TEST_CASE("an arrival past the clock's end: refused as a counted workload is built, found as a stream's comes") {
  TempDir dir;
  // At 1e-300 jobs an hour the first job comes at 0, the second some 1e303 s later.
  auto far = [](std::string toml) {
    toml.replace(toml.find("jobs_per_hour = 4"), 17, "jobs_per_hour = 1e-300");
    return toml;
  };
  auto refusal = [](auto&& attempt) -> std::string {
    try {
      attempt();
    } catch (const UserError& e) {
      return e.what();
    }
    return "no error";
  };
  auto workload_of = [&](const std::string& jobs) {
    const ExperimentConfig config = load_experiment(dir.write("w.toml", far(endless_experiment(jobs))));
    return build_workload(config.workload, ClusterState(config.cluster.nodes));
  };
  const std::string past = " s, past the 1e12 s (31,700 years) a simulation runs: see [workload]'s arrivals";
  const std::string counted = refusal([&] { workload_of("300"); });
  CHECK(counted.starts_with("job 1 would arrive at t="));
  CHECK(counted.ends_with(past));
  CHECK_NOTHROW(workload_of("\"until_tracked_done\""));
  const std::string streamed = refusal([&] { simulate(dir, far(endless_experiment("\"until_tracked_done\""))); });
  CHECK(streamed.starts_with("job 1 would arrive at t="));
  CHECK(streamed.ends_with(past));
}

TEST_CASE("a workload without end needs track, and none of the transforms that need the whole trace") {
  TempDir dir;
  const std::string file = (dir.path() / "w.toml").string();
  std::string toml = endless_experiment("\"until_tracked_done\"");
  toml.replace(toml.find("track = [10, 20]\n"), 17, "");
  dir.write("w.toml", toml);
  CHECK_THROWS_WITH_AS(load_experiment(file), (file + ":6:8: 'jobs = \"until_tracked_done\"' in [workload] needs "
                                                      "'track = [first, last)': the jobs whose end stops the "
                                                      "generator").c_str(),
                       ConfigError);
  for (const char* transform : {"window = [0, 100]", "vcs = [\"a\"]", "tenants = [\"a\"]", "max_jobs = 5",
                                "shuffle = true", "gpu_demand_ratio = 1.5", "poisson_jobs_per_hour = 3"}) {
    CAPTURE(transform);
    const std::string key(transform, std::string_view(transform).find(' '));
    dir.write("w.toml", endless_experiment("\"until_tracked_done\"", transform));
    CHECK_THROWS_WITH_AS(load_experiment(file),
                         (file + ":13:" + std::to_string(key.size() + 4) + ": '" + key + "' in [workload] works on the whole trace; a workload without "
                                 "end (jobs = \"until_tracked_done\") has none (the per-job transforms "
                                 "arrival_rate_scale, duration_scale and elastic_* apply)").c_str(),
                         ConfigError);
  }
  dir.write("w.toml", endless_experiment("\"forever\""));
  CHECK_THROWS_WITH_AS(load_experiment(file), (file + ":6:8: 'jobs' in [workload] must be a count of jobs, or "
                                                      "\"until_tracked_done\" (generate until every tracked job "
                                                      "is done), got 'forever'").c_str(),
                       ConfigError);
  // A trace file ends: only the generator has `jobs`.
  toml = endless_experiment("\"until_tracked_done\"");
  toml.replace(toml.find("kind = \"synthetic\""), 18, "kind = \"csv\"\npath = \"t.csv\"");
  dir.write("w.toml", toml);
  CHECK_THROWS_WITH_AS(load_experiment(file), doctest::Contains("7:1: unknown key 'jobs' in [workload]"),
                       ConfigError);
  // The command line refuses them the same way, with exit code 2.
  dir.write("w.toml", endless_experiment("\"until_tracked_done\"", "max_jobs = 5"));
  const CommandResult refused = run_tessel({"run", file});
  CHECK(refused.code == 2);
  CHECK(refused.err.find("'max_jobs' in [workload] works on the whole trace") != std::string::npos);
}

TEST_CASE("give_up_hours ends a run without end that has not finished its tracked jobs by then") {
  TempDir dir;
  const RunResults results = simulate(dir, endless_experiment("\"until_tracked_done\"", "give_up_hours = 2"));
  const double give_up = results.jobs[19].arrival + 2 * 3600;
  std::size_t unfinished = 0;
  for (const JobRecord& job : results.jobs) {
    CHECK(job.arrival <= give_up);
    if (job.tracked) unfinished += job.status != "finished";
  }
  CHECK(unfinished > 0);
  CHECK(results.end_time <= give_up);
  CHECK(results.note.find("the run gave up give_up_hours after the last tracked job arrived, with " +
                          std::to_string(unfinished) + " tracked jobs not done") != std::string::npos);
  // Without the limit the same run goes on until they are done.
  const RunResults patient = simulate(dir, endless_experiment("\"until_tracked_done\""), "patient.toml");
  CHECK(patient.end_time > give_up);

  // A finite workload ends by itself: the limit is refused there.
  const std::string file = (dir.path() / "w.toml").string();
  dir.write("w.toml", endless_experiment("300", "give_up_hours = 2"));
  CHECK_THROWS_WITH_AS(load_experiment(file), (file + ":13:17: 'give_up_hours' in [workload] applies only to jobs "
                                                      "without end (kind = \"synthetic\", jobs = "
                                                      "\"until_tracked_done\")").c_str(),
                       ConfigError);
}

// ------------------------------------------------- Blox's bursty load

namespace {

// Blox's Figure 13 load, as fig13.toml has it: 1-GPU base jobs of 10 to 24 h
// at 8 an hour and bursts of 600 to 3600 s jobs at 4 times that rate.
const char* kBursty = R"(duration_seconds = [36000, 86400]
burst = { every_hours = 4, hours = 2, rate_factor = 4, duration_seconds = [600, 3600] }
)";

std::string bursty_experiment(const std::string& jobs, const std::string& extra = kBursty) {
  std::string toml = endless_experiment(jobs, extra);
  toml.replace(toml.find("jobs_per_hour = 4"), 17, "jobs_per_hour = 8");
  const std::string sizes = "gpu_counts = [1, 2]\ngpu_weights = [3, 1]";
  toml.replace(toml.find(sizes), sizes.size(), "gpu_counts = [1]\ngpu_weights = [1]");
  // Jobs 30..59 arrive around the first burst (4 h): both streams are tracked.
  toml.replace(toml.find("track = [10, 20]"), 16, "track = [30, 60]");
  return toml;
}

}  // namespace

TEST_CASE("burst adds a second Poisson stream inside periodic windows, with durations of its own") {
  TempDir dir;
  const ExperimentConfig config = load_experiment(dir.write("w.toml", bursty_experiment("20000")));
  const Workload w = build_workload(config.workload, ClusterState(config.cluster.nodes));
  REQUIRE(w.jobs.size() == 20000);
  // Counted by hand from the jobs: arrivals, per stream, over the hours the
  // base stream's jobs span.
  const double horizon = w.jobs.back().arrival;
  std::size_t base = 0, burst = 0;
  double base_seconds = 0, burst_seconds = 0;
  for (std::size_t i = 0; i < w.jobs.size(); ++i) {
    const JobSpec& job = w.jobs[i];
    CHECK(job.gpus == 1);
    if (i > 0) CHECK(job.arrival >= w.jobs[i - 1].arrival);  // one stream: ids in arrival order
    const double seconds = job.total_work;                     // linear model: work is the duration
    CHECK(seconds == std::floor(seconds));
    if (job.tenant == "burst") {
      ++burst;
      burst_seconds += seconds;
      CHECK(seconds >= 600);
      CHECK(seconds <= 3600);
      // Inside a window [4k, 4k + 2) h, k >= 1.
      const double hours = job.arrival / 3600;
      CHECK(hours >= 4);
      CHECK(std::fmod(hours, 4) < 2);
    } else {
      REQUIRE(job.tenant == "base");
      ++base;
      base_seconds += seconds;
      CHECK(seconds >= 36000);
      CHECK(seconds <= 86400);
    }
  }
  // Base: 8 jobs/h over the horizon. Burst: 32 jobs/h for 2 h in every 4 h
  // from 4 h on, 16 jobs/h on average: twice the base count. Each within 5%
  // (the Poisson standard deviation is about 1% at these counts).
  const double hours = horizon / 3600;
  CHECK(base == doctest::Approx(8 * hours).epsilon(0.05));
  CHECK(burst == doctest::Approx(16 * (hours - 4)).epsilon(0.05));
  // Mean durations: the middle of each uniform range.
  CHECK(base_seconds / base == doctest::Approx((36000 + 86400) / 2.0).epsilon(0.02));
  CHECK(burst_seconds / burst == doctest::Approx((600 + 3600) / 2.0).epsilon(0.02));

  // The base stream is the jobs duration_seconds alone makes: bursts draw from a stream of their own.
  const ExperimentConfig plain =
      load_experiment(dir.write("plain.toml", bursty_experiment("2000", "duration_seconds = [36000, 86400]\n")));
  const Workload alone = build_workload(plain.workload, ClusterState(plain.cluster.nodes));
  std::size_t next = 0;
  for (const JobSpec& job : w.jobs)
    if (job.tenant == "base" && next < alone.jobs.size()) {
      CHECK(job.arrival == alone.jobs[next].arrival);
      CHECK(job.total_work == alone.jobs[next].total_work);
      ++next;
    }
  CHECK(next == alone.jobs.size());
  CHECK(alone.jobs.front().tenant.empty());  // without bursts the jobs are not labelled
}

TEST_CASE("a bursty workload without end stops exactly when the tracked jobs are done") {
  TempDir dir;
  const RunResults results = simulate(dir, bursty_experiment("\"until_tracked_done\""));
  double last_tracked_finish = 0;
  std::size_t tracked = 0, tracked_bursts = 0;
  for (const JobRecord& job : results.jobs)
    if (job.tracked) {
      ++tracked;
      tracked_bursts += job.tenant == "burst";
      REQUIRE(job.status == "finished");
      last_tracked_finish = std::max(last_tracked_finish, *job.finish);
    }
  CHECK(tracked == 30);
  CHECK(tracked_bursts > 0);
  CHECK(results.end_time == last_tracked_finish);
  const std::size_t arrived = results.jobs.size();
  for (const JobRecord& job : results.jobs) CHECK(job.arrival <= last_tracked_finish);
  // The stream made exactly those jobs: the next one of the merged streams comes later.
  const ExperimentConfig config = load_experiment(dir.write("s.toml", bursty_experiment("\"until_tracked_done\"")));
  Workload stream = build_workload(config.workload, ClusterState(config.cluster.nodes));
  bool burst_seen = false;
  JobSpec next;
  for (std::size_t i = 0; i <= arrived; ++i) {
    next = stream.stream->next();
    if (i < arrived) {
      CHECK(next.arrival == results.jobs[i].arrival);
      burst_seen = burst_seen || next.tenant == "burst";
    }
  }
  CHECK(burst_seen);
  CHECK(next.id == arrived);
  CHECK(next.arrival > last_tracked_finish);
}

TEST_CASE("bursty workload mistakes are refused, named") {
  TempDir dir;
  const std::string file = (dir.path() / "w.toml").string();
  const auto refused = [&](const std::string& extra, const std::string& message) {
    CAPTURE(extra);
    dir.write("w.toml", bursty_experiment("\"until_tracked_done\"", extra));
    CHECK_THROWS_WITH_AS(load_experiment(file), doctest::Contains(message.c_str()), ConfigError);
  };
  refused("duration_seconds = [36000, 86400]\nshort_fraction = 0.5",
          "'short_fraction' in [workload] shapes the short/long duration mix, which 'duration_seconds' replaces");
  refused("duration_seconds = [100, 10]", "'duration_seconds' in [workload] must be [low, high] whole seconds");
  refused("duration_seconds = [10.5, 100]", "'duration_seconds' in [workload] must be [low, high] whole seconds");
  refused("burst = { every_hours = 4, hours = 5 }", "'hours' in [workload.burst] must be at most 'every_hours'");
  refused("burst = { hours = 0 }", "'hours' in [workload.burst] must be > 0");
  refused("burst = { rate_factor = 0 }", "'rate_factor' in [workload.burst] must be > 0");
  refused("burst = { duration_seconds = [0, 10] }", "'duration_seconds' in [workload.burst]");
  refused("burst = { every = 4 }", "unknown key 'every' in [workload.burst] (valid: ");
  refused("burst = 4", "'burst' in [workload] must be a table");
  std::string toml = bursty_experiment("\"until_tracked_done\"", "burst = {}");
  toml.replace(toml.find("jobs_per_hour = 8"), 17, "jobs_per_hour = 0");
  dir.write("w.toml", toml);
  CHECK_THROWS_WITH_AS(load_experiment(file), doctest::Contains("'burst' in [workload] needs 'jobs_per_hour' > 0"),
                       ConfigError);
  // The command line refuses them with exit code 2.
  dir.write("w.toml", bursty_experiment("\"until_tracked_done\"", "burst = { hours = 5 }"));
  const CommandResult run = run_tessel({"run", file});
  CHECK(run.code == 2);
  CHECK(run.err.find("'hours' in [workload.burst] must be at most 'every_hours'") != std::string::npos);
}

// ------------------------------------------------- profile_assignment

// [workload] profile_assignment = "exact_shares": Synergy's way of giving
// jobs models (ModelAssignment.OVERALL), each job the profile furthest below
// its share so far, against the default weighted draw.

TEST_CASE("exact shares give each job the profile furthest below its share, the first in order on a tie") {
  TempDir dir;
  // Solo 3 : Duo 1. Owed before each job (n/4 - Duo so far, 3n/4 - Solo so far), the
  // weights in name order: job 0: 0, 0 -> Duo (first); job 1: -0.75, 0.75 -> Solo;
  // job 2: -0.5, 0.5 -> Solo; job 3: -0.25, 0.25 -> Solo; the cycle repeats from the tie at n = 4.
  const Workload w = synthetic_profiles(dir, "profile_weights = { Solo = 3, Duo = 1 }\n"
                                             "profile_assignment = \"exact_shares\"", 8, "[1]");
  CHECK(models(w) == "DSSSDSSS");
  CHECK(w.notes.back() == "gave 8 jobs a profile of 'gavel-table', in exact shares of profile_weights");

  // Without weights, equal shares: the profiles in turn (the model lists Duo first).
  const Workload equal = synthetic_profiles(dir, "profile_assignment = \"exact_shares\"", 6, "[1]");
  CHECK(models(equal) == "DSDSDS");
  CHECK(equal.notes.back() == "gave 6 jobs a profile of 'gavel-table', in exact shares");

  // The default draw at random keeps the split only on average.
  const Workload drawn = synthetic_profiles(dir, "profile_weights = { Solo = 3, Duo = 1 }", 400, "[1]");
  const std::string drawn_models = models(drawn);
  const auto solo = std::count(drawn_models.begin(), drawn_models.end(), 'S');
  CHECK(solo != 300);  // seed 1; exact shares give 300 of 400
  CHECK(solo == doctest::Approx(300).epsilon(0.1));
  const Workload exact = synthetic_profiles(dir, "profile_weights = { Solo = 3, Duo = 1 }\n"
                                                 "profile_assignment = \"exact_shares\"", 400, "[1]");
  const std::string exact_models = models(exact);
  CHECK(std::count(exact_models.begin(), exact_models.end(), 'S') == 300);
}

TEST_CASE("exact shares are kept apart for each GPU count, as the profiles that suit it") {
  TempDir dir;
  // Two-GPU jobs can only be Duo; one-GPU jobs alternate, whatever the two-GPU jobs got.
  const Workload w = synthetic_profiles(dir, "profile_assignment = \"exact_shares\"", 200, "[1, 2]");
  std::string one;
  for (const JobSpec& job : w.jobs) {
    if (job.gpus == 2) CHECK(job.model == "Duo");
    if (job.gpus == 1) one += job.model == "Solo" ? 'S' : 'D';
  }
  REQUIRE(one.size() >= 4);
  for (std::size_t i = 0; i < one.size(); ++i) CHECK(one[i] == (i % 2 == 0 ? 'D' : 'S'));
}

TEST_CASE("profile_assignment mistakes are located") {
  TempDir dir;
  const std::string file = (dir.path() / "w.toml").string();
  CHECK_THROWS_WITH_AS(synthetic_profiles(dir, "profile_assignment = \"round_robin\"", 10, "[1]"),
                       (file + ":11:22: unknown profile_assignment 'round_robin' in [workload] "
                               "(valid: random, exact_shares)")
                           .c_str(),
                       ConfigError);
  // A model without profiles has nothing to assign.
  dir.write("linear.toml", R"([cluster]
nodes = 1
gpus_per_node = 4
[workload]
kind = "synthetic"
jobs = 10
profile_assignment = "exact_shares"
[scheduler]
allocation = { plugin = "fifo" }
placement = { plugin = "first_fit" }
)");
  const std::string linear = (dir.path() / "linear.toml").string();
  CHECK_THROWS_WITH_AS(load_experiment(linear),
                       (linear + ":7:22: throughput model 'linear' has no profiles to assign; "
                                 "'profile_assignment' needs a model that has")
                           .c_str(),
                       ConfigError);
}
