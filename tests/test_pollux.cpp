// The `pollux` allocation and elasticity plugins: their decisions on
// hand-built clusters, checked against Pollux's objective evaluated in the
// test by brute force over every allocation, on small applications written
// here (and on Pollux's own, when ../shared/data is present); the restart
// penalty as charged to resizes; their invariants over whole workloads.
#include <doctest/doctest.h>

#include <cmath>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "config/experiment.hpp"
#include "experiment_runner.hpp"
#include "models/pollux_apps.hpp"
#include "plugins/composition.hpp"
#include "plugins/registry.hpp"
#include "simulation.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

// Failed checks on GPU counts print them.
template <>
struct doctest::StringMaker<std::vector<int>> {
  static doctest::String convert(const std::vector<int>& values) {
    std::string text = "{";
    for (int v : values) text += (text.size() > 1 ? ", " : "") + std::to_string(v);
    return (text + "}").c_str();
  }
};

namespace {

// Two applications of 2 epochs (ending at progress 1000 and 3000), batch
// sizes 10 to 80, micro-batches of 10 to 20 samples, on 4-GPU nodes.
// `steady` loses little across nodes (0.3 s to synchronize) but its
// gradient noise is low, so large batches gain little; `noisy` pays 3 s to
// synchronize across nodes, and its noise makes large batches efficient.
void write_apps(const TempDir& dir) {
  const std::string one_node =
      "placement,local_bsz,step_time,sync_time\n"
      "1,10,1.0,0.0\n1,20,1.8,0.0\n"
      "2,10,1.1,0.1\n2,20,1.9,0.1\n"
      "3,10,1.15,0.15\n3,20,1.95,0.15\n"
      "4,10,1.2,0.2\n4,20,2.0,0.2\n";
  dir.write("steady/placements.csv", one_node);
  dir.write("noisy/placements.csv", one_node);
  dir.write("steady/scalability.csv",
            "num_nodes,num_replicas,local_bsz,step_time,sync_time\n"
            "2,2,10,1.3,0.3\n2,2,20,2.1,0.3\n2,8,10,1.3,0.3\n2,8,20,2.1,0.3\n");
  dir.write("noisy/scalability.csv",
            "num_nodes,num_replicas,local_bsz,step_time,sync_time\n"
            "2,2,10,4.0,3.0\n2,2,20,4.8,3.0\n2,8,10,4.0,3.0\n2,8,20,4.8,3.0\n");
  for (const char* batch : {"10", "80"}) {
    dir.write(std::string("steady/validation-") + batch + ".csv",
              "progress,grad_sqr,grad_var\n1000,1,0.5\n3000,1,1\n");
    dir.write(std::string("noisy/validation-") + batch + ".csv",
              "progress,grad_sqr,grad_var\n1000,1,20\n3000,1,40\n");
  }
}

// The plugins as the loader creates them, sharing one slot registry.
class PolluxPair {
 public:
  explicit PolluxPair(toml::table allocation_args = {}, toml::table elasticity_args = {}) {
    allocation_ = make(PluginKind::allocation, std::move(allocation_args), allocation_plugin_, allocation_args_);
    elasticity_ = make(PluginKind::elasticity, std::move(elasticity_args), elasticity_plugin_, elasticity_args_);
  }
  AllocationPolicy& allocation() { return *dynamic_cast<AllocationPolicy*>(allocation_plugin_.get()); }
  ElasticityPolicy& elasticity() { return *dynamic_cast<ElasticityPolicy*>(elasticity_plugin_.get()); }

 private:
  Plugin* make(PluginKind kind, toml::table arguments, PluginPtr<Plugin>& plugin, PluginArgs& args) {
    const PluginEntry& entry = registry_.find(kind, "pollux");
    StageConfig stage;
    stage.kind = kind;
    stage.plugin = "pollux";
    stage.args = std::move(arguments);
    Diagnostics diagnostics;
    args = check_arguments(stage, entry, {}, diagnostics);
    REQUIRE(diagnostics.empty());
    plugin = PluginRegistry::create(entry, PluginContext(args, 1, slots_));
    return plugin.get();
  }

  PluginRegistry registry_;
  SlotRegistry slots_;
  PluginArgs allocation_args_, elasticity_args_;
  PluginPtr<Plugin> allocation_plugin_, elasticity_plugin_;
  Plugin* allocation_ = nullptr;
  Plugin* elasticity_ = nullptr;
};

// A cluster of `nodes` x 4 GPUs and jobs set up by hand, as the core keeps them.
class Scene {
 public:
  Scene(int nodes, const ThroughputModel& model) : model_(model) {
    std::vector<NodeSpec> specs;
    for (int i = 0; i < nodes; ++i) specs.push_back({"n" + std::to_string(i), "t4", 4, 32, 256, 0});
    cluster = ClusterState(specs);
  }

  // An elastic job of `app` on [1, 64] GPUs that arrived at `arrival`, has
  // made `progress` and runs on `gpus` (none: it waits).
  JobState& job(const std::string& app, double arrival, double progress, std::vector<GpuId> gpus = {},
                int batch_size = 0) {
    JobState& job = jobs_.emplace_back();
    job.spec.id = static_cast<JobId>(all_.size());
    job.spec.model = app;
    job.spec.gpus = 1;
    job.spec.min_gpus = 1;
    job.spec.max_gpus = 64;
    job.spec.arrival = arrival;
    job.spec.total_work = 3000;
    job.executed_work = progress;
    job.status = gpus.empty() ? JobStatus::queued : JobStatus::running;
    job.allocation = Allocation{std::move(gpus), 1000, 0, 0, JobLayout{batch_size, 0, 0}};
    if (job.running()) cluster.assign(job.spec.id, job.allocation);
    all_.push_back(&job);
    if (job.waiting()) waiting_.push_back(&job);
    return job;
  }

  SchedulerView view(double now) const {
    return SchedulerView(settings_, cluster, model_, all_, {}, all_, waiting_, now);
  }

  ClusterState cluster;

 private:
  const ThroughputModel& model_;
  SchedulerSettings settings_;
  std::deque<JobState> jobs_;
  std::vector<JobState*> all_;
  std::vector<JobState*> waiting_;  // the queued ones
};

std::map<JobId, int> granted(const AllocationPlan& plan) {
  std::map<JobId, int> out;
  for (const Grant& grant : plan.ranked) out[grant.job] = grant.resources.gpus;
  return out;
}

// ---------------------------------------------------------------- Pollux's rule, evaluated by brute force

// The 50 batch sizes GoodputFunction.optimize tries, geometrically spaced
// over the range, rounded: for the applications above, from max(10, 10 per
// GPU) to 80.
std::vector<int> candidates(int smallest, int largest) {
  std::vector<int> out;
  for (int i = 0; i < 50; ++i) {
    const int b = static_cast<int>(std::lround(smallest * std::pow(double(largest) / smallest, i / 49.0)));
    if (out.empty() || b != out.back()) out.push_back(b);
  }
  return out;
}

struct Best {
  int batch_size = 0;
  double goodput = 0;
};

// The best goodput of `job` on `gpus` GPUs over `nodes` nodes.
Best best_goodput(const PolluxAppsModel& model, const JobSpec& job, int gpus, int nodes, double progress) {
  Best best;
  const BatchSizeRange range = model.batch_sizes(job, gpus).value();
  if (range.empty()) return best;
  for (int b : candidates(range.smallest, range.largest)) {
    Shape shape;
    shape.gpus = gpus;
    shape.nodes = nodes;
    shape.layout.batch_size = b;
    const double goodput = model.rate_at(job, shape, progress);
    if (goodput > best.goodput) best = {b, goodput};
  }
  return best;
}

// What Pollux's objective needs to know of a job.
struct Standing {
  const JobState* job;
  int held;         // GPUs it holds
  int allocations;  // allocations it has had (restarts + 1)
  bool measured;    // it has run, so its goodput is known
};

// Pollux's objective (p = -1) for GPU counts `g`, up to a constant:
// -sum_j 1 / (speedup_j x restart_j x nodes / GPUs + 0.001).
double objective(const PolluxAppsModel& model, const std::vector<Standing>& jobs, const std::vector<int>& g,
                 double now, int cluster_gpus, int nodes) {
  const int fair = (cluster_gpus + static_cast<int>(jobs.size()) - 1) / static_cast<int>(jobs.size());
  double sum = 0;
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const JobState& job = *jobs[j].job;
    double speedup = 0;
    if (g[j] > 0 && jobs[j].measured)
      speedup = best_goodput(model, job.spec, g[j], (g[j] + 3) / 4, job.executed_work).goodput /
                best_goodput(model, job.spec, fair, 1, job.executed_work).goodput;
    else if (g[j] > 0)
      speedup = static_cast<double>(g[j]) / fair;
    const double age = now - job.spec.arrival;
    const int restarts = std::max(jobs[j].allocations - 1, 0);
    if (g[j] != jobs[j].held) speedup *= std::max(age - 30.0 * restarts, 0.0) / (age + 30);
    sum -= 1 / (speedup * nodes / cluster_gpus + 0.001);
  }
  return sum;
}

}  // namespace

TEST_CASE("pollux: GPU counts and batch sizes that maximize the power mean of speedups, by brute force") {
  TempDir dir;
  write_apps(dir);
  const PolluxAppsModel model(dir.path());
  PolluxPair pollux;      // outlives the jobs, whose slots hold its state
  Scene scene(2, model);  // GPUs 0-3 on n0, 4-7 on n1
  // At t = 600: steady has run on 4 GPUs (it may grow to 8), noisy on 2
  // (to 4); a second noisy job arrived at 590 and has never run (1 GPU, at
  // a speedup of 1 / fair share).
  const JobState& steady = scene.job("steady", 0, 500, {0, 1, 2, 3}, 40);
  const JobState& noisy = scene.job("noisy", 100, 1500, {4, 5}, 20);
  const JobState& newcomer = scene.job("noisy", 590, 0);
  const AllocationPlan plan = pollux.allocation().allocate(scene.view(600));

  const std::vector<Standing> jobs{{&steady, 4, 1, true}, {&noisy, 2, 1, true}, {&newcomer, 0, 0, false}};
  std::vector<int> best;
  double best_value = -INFINITY;
  for (int a = 0; a <= 8; ++a)
    for (int b = 0; b <= 4 && a + b <= 8; ++b)
      for (int c = 0; c <= 1 && a + b + c <= 8; ++c) {
        const double value = objective(model, jobs, {a, b, c}, 600, 8, 2);
        if (best.empty() || value > best_value + 1e-9 * std::fabs(best_value)) {
          best_value = value;
          best = {a, b, c};
        }
      }
  const std::map<JobId, int> gpus = granted(plan);
  const std::vector<int> chosen{gpus.at(steady.spec.id), gpus.at(noisy.spec.id), gpus.at(newcomer.spec.id)};
  CHECK(chosen == best);
  // steady gives up a GPU for noisy to reach its cap, and the newcomer starts on one.
  CHECK(chosen == std::vector<int>{3, 4, 1});

  // Each job trains at its goodput-best batch size on what it gets: steady,
  // in its low-noise first epoch, at the smallest (10 a GPU); noisy near the
  // largest (77 and 80 both make micro-batches of 20; the smaller is kept);
  // the newcomer at the initial 10.
  const std::vector<std::vector<GpuId>> placed{{0, 1, 2}, {4, 5, 6, 7}, {3}};
  std::vector<int> batches;
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const JobState& job = *jobs[j].job;
    Allocation allocation{placed[j], 1000, 0, 0, {}};
    const Shape shape = scene.cluster.shape_of(allocation);
    batches.push_back(pollux.elasticity().arrange(scene.view(600), job, allocation).batch_size);
    CHECK(batches.back() == best_goodput(model, job.spec, shape.gpus, shape.nodes, job.executed_work).batch_size);
  }
  CHECK(batches == std::vector<int>{30, 77, 10});
}

TEST_CASE("pollux: between reallocations running jobs keep their GPUs and new arrivals wait") {
  TempDir dir;
  write_apps(dir);
  const PolluxAppsModel model(dir.path());
  PolluxPair pollux(toml::table{{"interval_seconds", 120}});
  Scene scene(2, model);
  const JobState& steady = scene.job("steady", 0, 500, {0, 1, 2, 3}, 40);
  // Alone it could double, but 8 GPUs would train at the smallest batch
  // they allow, 80, which its low noise makes slower than 40 on 4 GPUs.
  CHECK(granted(pollux.allocation().allocate(scene.view(600))).at(steady.spec.id) == 4);
  const JobState& newcomer = scene.job("noisy", 610, 0);
  const AllocationPlan plan = pollux.allocation().allocate(scene.view(660));
  REQUIRE(plan.ranked.size() == 2);
  CHECK(plan.ranked[0].resources.gpus == 4);
  CHECK(plan.ranked[0].reason.str() == "keeps its 4 GPUs until the next reallocation at 720 s");
  CHECK(plan.ranked[1].job == newcomer.spec.id);
  CHECK(plan.ranked[1].resources.gpus == 0);
  CHECK(plan.ranked[1].reason.str() == "waits for the next reallocation at 720 s");
  CHECK(granted(pollux.allocation().allocate(scene.view(720))).at(newcomer.spec.id) == 1);
}

TEST_CASE("pollux on Pollux's applications: cifar10 and yolov3 share 8 GPUs as the objective says") {
  const auto apps = shared_data("pollux/apps");
  if (!apps) {
    MESSAGE("skipped: ../shared/data/pollux/apps is absent");
    return;
  }
  const PolluxAppsModel model(*apps);
  PolluxPair pollux;
  Scene scene(2, model);
  // cifar10 in its 20th epoch on 2 GPUs, yolov3 in its 3rd on 4; at t = 1800
  // each may grow to twice that.
  const PolluxApplication& cifar10 = *model.application("cifar10");
  const PolluxApplication& yolov3 = *model.application("yolov3");
  const JobState& a = scene.job("cifar10", 0, cifar10.epoch_start(19) + 1, {0, 1}, 256);
  const JobState& b = scene.job("yolov3", 300, yolov3.epoch_start(2) + 1, {4, 5, 6, 7}, 64);
  const std::map<JobId, int> gpus = granted(pollux.allocation().allocate(scene.view(1800)));

  const std::vector<Standing> jobs{{&a, 2, 1, true}, {&b, 4, 1, true}};
  std::vector<int> best;
  double best_value = -INFINITY;
  for (int x = 0; x <= 4; ++x)
    for (int y = 0; y <= 8 && x + y <= 8; ++y) {
      const double value = objective(model, jobs, {x, y}, 1800, 8, 2);
      if (best.empty() || value > best_value + 1e-9 * std::fabs(best_value)) {
        best_value = value;
        best = {x, y};
      }
    }
  CHECK(std::vector<int>{gpus.at(a.spec.id), gpus.at(b.spec.id)} == best);
  CHECK(best == std::vector<int>{4, 4});  // cifar10 doubles to its cap; yolov3 keeps its node

  // Their batch sizes on one node each, the goodput-best of Pollux's 50 candidates.
  const std::vector<std::vector<GpuId>> placed{{0, 1, 2, 3}, {4, 5, 6, 7}};
  std::vector<int> batches;
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const JobState& job = *jobs[j].job;
    const Allocation allocation{placed[j], 1000, 0, 0, {}};
    batches.push_back(pollux.elasticity().arrange(scene.view(1800), job, allocation).batch_size);
    CHECK(batches.back() == best_goodput(model, job.spec, 4, 1, job.executed_work).batch_size);
  }
  CHECK(batches == std::vector<int>{699, 30});
}

// ---------------------------------------------------------------- whole runs

namespace {

// Pollux's set-up on the applications in `apps` (relative to the config),
// jobs.csv in Pollux's workload format: every job elastic on [1, 64] GPUs
// but ncf's, 60 s rounds; `extra` goes into [workload].
std::string pollux_experiment(int nodes, const std::string& apps, const std::string& allocation_args = "",
                              const std::string& elasticity_args = "", const std::string& extra = "") {
  return "[cluster]\nnodes = " + std::to_string(nodes) + R"(
gpus_per_node = 4

[workload]
kind = "pollux-workload"
path = "jobs.csv"
model = { name = "pollux-apps", path = ")" + apps + R"(" }
elastic_min_gpus = 1
elastic_max_gpus = 64
elastic_models = ["steady", "noisy", "bert", "cifar10", "deepspeech2", "imagenet", "yolov3"]
)" + extra + R"(
[scheduler]
round_seconds = 60
allocation = { plugin = "pollux")" + allocation_args + R"( }
placement = { plugin = "consolidated" }
elasticity = { plugin = "pollux")" + elasticity_args + R"( }

[simulation]
preemption_overhead_seconds = 30
)";
}

// Runs the experiment, calling `each_round` after every round.
RunResults run_observed(const TempDir& dir, const std::string& toml,
                        const std::function<void(double, const Scheduler&)>& each_round) {
  const ExperimentConfig config = load_experiment(dir.write("experiment.toml", toml));
  PluginRegistry registry;
  Simulation simulation(config, registry);
  simulation.observe_rounds([&](double now, const Scheduler& scheduler, const RoundOutcome&) { each_round(now, scheduler); });
  return simulation.run();
}

// What must hold after every round of Pollux: jobs within their range, an
// elastic job on at most twice the GPUs it ran on before (at least 1), at a
// batch size its GPUs can train with; rigid jobs on their request at their
// own batch size; no GPU held twice.
class PolluxInvariants {
 public:
  void check(const Scheduler& scheduler) {
    const ThroughputModel& model = scheduler.model();
    std::vector<int> holders(scheduler.cluster().gpus().size(), 0);
    for (const JobState* job : scheduler.jobs()) {
      if (most_.size() <= job->spec.id) most_.resize(job->spec.id + 1, 0);
      if (!job->running()) continue;
      const int gpus = job->allocation.gpu_count();
      CAPTURE(job->spec.id);
      CHECK(gpus >= job->spec.min_gpus);
      CHECK(gpus <= job->spec.max_gpus);
      for (GpuId gpu : job->allocation.gpus) ++holders[gpu];
      if (job->spec.elastic()) {
        CHECK(gpus <= std::max(2 * most_[job->spec.id], 1));
        const BatchSizeRange range = model.batch_sizes(job->spec, gpus).value();
        CHECK(job->allocation.layout.batch_size >= range.smallest);
        CHECK(job->allocation.layout.batch_size <= range.largest);
      } else {
        CHECK(gpus == job->spec.gpus);
        CHECK(job->allocation.layout.batch_size == 0);
      }
      most_[job->spec.id] = std::max(most_[job->spec.id], gpus);
    }
    for (int count : holders) CHECK(count <= 1);
  }

 private:
  std::vector<int> most_;  // GPUs each job has held at most, by id
};

}  // namespace

TEST_CASE("pollux: a change of GPUs costs exactly the restart; a change of batch size alone, nothing") {
  TempDir dir;
  write_apps(dir);
  dir.write("jobs.csv",
            "name,time,application,num_replicas,batch_size\n"
            "a,0,steady,1,10\nb,30,noisy,1,10\nc,200,noisy,2,20\nd,900,steady,1,10\n");
  PolluxInvariants invariants;
  const RunResults results = run_observed(
      dir, pollux_experiment(2, ".", ", restart_penalty_seconds = 45", ", restart_seconds = 45"),
      [&](double, const Scheduler& scheduler) { invariants.check(scheduler); });
  int restarts = 0, retunes = 0;
  for (const ResizeRecord& resize : results.resizes) {
    CAPTURE(resize.time);
    CAPTURE(resize.job);
    if (resize.from_gpus != resize.to_gpus) {
      CHECK(resize.cost_seconds == 45);
      ++restarts;
    } else {
      CHECK(resize.cost_seconds == 0);
      ++retunes;
    }
  }
  CHECK(restarts > 0);
  CHECK(retunes > 0);
  for (const JobRecord& job : results.jobs) CHECK(job.status == "finished");
}

TEST_CASE("pollux keeps its invariants on Pollux's workload, ncf rigid as in its simulator") {
  const auto apps = shared_data("pollux/apps");
  const auto workload = shared_data("pollux/workloads/workload-1.csv");
  if (!apps || !workload) {
    MESSAGE("skipped: ../shared/data/pollux is absent");
    return;
  }
  TempDir dir;
  std::ifstream in(*workload);
  std::stringstream text;
  text << in.rdbuf();
  dir.write("jobs.csv", text.str());
  PolluxInvariants invariants;
  std::size_t rounds = 0;
  const RunResults results =
      run_observed(dir, pollux_experiment(16, apps->string(), "", "", "max_jobs = 60\n"),
                   [&](double, const Scheduler& scheduler) {
                     invariants.check(scheduler);
                     ++rounds;
                   });
  CHECK(rounds > 100);
  std::size_t finished = 0, ncf = 0;
  for (const JobRecord& job : results.jobs) {
    finished += job.status == "finished";
    if (job.model == "ncf") {
      ++ncf;
      CHECK(job.max_gpus == 1);
    }
  }
  CHECK(finished == 60);
  CHECK(ncf > 0);
  for (const ResizeRecord& resize : results.resizes)
    CHECK(resize.cost_seconds == (resize.from_gpus != resize.to_gpus ? 30 : 0));
}
