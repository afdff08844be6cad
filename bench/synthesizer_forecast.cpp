// bench/synthesizer_forecast: what the synthesizer's forecasts cost.
//
// The run: Blox's bursty load (experiments/blox-fig12-13, 10,000 jobs: long
// jobs at 8 jobs/h and bursts of short ones) on Blox's 32 x 4 GPUs, 300 s
// rounds, under accept_all + LAS, the policy that keeps the most jobs in the
// system (it starves the long ones). At four moments of the run it measures,
// best of 5, in wall time and this thread's CPU time:
//   fork       copying the simulation (Simulation::fork: every job, done
//              ones too, since a fork's plugins may write any job's slots;
//              per-job bookkeeping, the event queue, the cluster) and
//              creating the candidate's plugins
//   forecast   fork + simulating one candidate: 4 h ahead with the arrivals
//              known (the synthesizer's default), and Blox's rule (until the
//              jobs present are done, no arrivals)
//   evaluation Blox's nine candidates (LAS, FIFO, SRTF x accept_all,
//              load_based 1.2x, 1.4x), one forecast each
// Blox does this in Python: every round it deep-copies the scheduler, the
// admission and placement policies, the whole job state and the cluster's
// GPU table once per candidate, nine times (predict_simulation.py);
// bench/blox_deepcopy.py times such deep copies for comparison.
//   build/bench/synthesizer_forecast [TRACE]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "config/experiment.hpp"
#include "plugins/composition.hpp"
#include "plugins/registry.hpp"
#include "simulation.hpp"

using namespace tessel;

namespace {

const char* const kCandidates[9][2] = {
    {"accept_all", "las"},
    {"accept_all", "fifo"},
    {"accept_all", "srtf"},
    {"load_based { factor = 1.2 }", "las"},
    {"load_based { factor = 1.2 }", "fifo"},
    {"load_based { factor = 1.2 }", "srtf"},
    {"load_based { factor = 1.4 }", "las"},
    {"load_based { factor = 1.4 }", "fifo"},
    {"load_based { factor = 1.4 }", "srtf"},
};

double cpu_ms() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return now.tv_sec * 1e3 + now.tv_nsec / 1e6;
}

struct Cost {
  double wall = 1e18, cpu = 1e18;  // ms, best of the repetitions
};

template <class F>
Cost best_of(int repetitions, F&& f) {
  Cost best;
  for (int i = 0; i < repetitions; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = cpu_ms();
    f();
    best.cpu = std::min(best.cpu, cpu_ms() - cpu_start);
    best.wall = std::min(best.wall,
                         std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string trace = argc > 1 ? argv[1] : "experiments/blox-fig12-13/bursty-8jph-seed1.csv";
  const std::string toml = R"([cluster]
preset = "blox"
[workload]
kind = "csv"
path = ")" + trace + R"("
[scheduler]
round_seconds = 300
attained_service = "seconds"
admission = { plugin = "accept_all" }
allocation = { plugin = "las" }
placement = { plugin = "consolidated" }
[simulation]
completion = "round"
)";
  PluginRegistry registry;
  const ExperimentConfig config =
      read_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(toml, "synthesizer_forecast")));
  Simulation simulation(config, registry);
  std::printf("synthesizer_forecast: %s, %zu jobs, accept_all + las on 32 x 4 GPUs; best of 5, wall / CPU\n",
              trace.c_str(), simulation.job_count());
  std::printf("%6s %6s %6s %5s | %15s %9s | %15s %15s | %17s %17s\n", "hour", "known", "live", "run",
              "fork (ms)", "us/known", "4 h ahead (ms)", "Blox rule (ms)", "9 x 4 h (ms)", "9 x Blox (ms)");

  SchedulerConfig composition = config.scheduler;
  composition.stages[0] = parse_stage(PluginKind::admission, "accept_all");
  composition.stages[1] = parse_stage(PluginKind::allocation, "las");
  std::vector<double> moments{100 * 3600.0, 200 * 3600.0, 300 * 3600.0, 400 * 3600.0};
  simulation.observe_rounds([&](double now, const Scheduler& scheduler, const RoundOutcome&) {
    if (moments.empty() || now < moments.front()) return;
    moments.erase(moments.begin());
    std::size_t live = 0, running = scheduler.running_count();
    for (const JobState* job : scheduler.jobs()) live += !job->done();
    PolicyLab& lab = simulation.lab();
    const Cost fork = best_of(5, [&] { simulation.fork(composition); });
    const ForecastOptions ahead{14400, true}, blox{0, false};
    const Cost one_ahead = best_of(5, [&] { lab.forecast("accept_all", "las", ahead); });
    const Cost one_blox = best_of(5, [&] { lab.forecast("accept_all", "las", blox); });
    const Cost all_ahead = best_of(5, [&] {
      for (const auto& c : kCandidates) lab.forecast(c[0], c[1], ahead);
    });
    const Cost all_blox = best_of(5, [&] {
      for (const auto& c : kCandidates) lab.forecast(c[0], c[1], blox);
    });
    std::printf("%6.0f %6zu %6zu %5zu | %7.3f / %5.3f %9.2f | %7.2f / %5.2f %7.1f / %5.1f | %8.1f / %6.1f %8.0f / %6.0f\n",
                now / 3600, scheduler.job_count(), live, running, fork.wall, fork.cpu, 1000 * fork.cpu / static_cast<double>(scheduler.job_count()),
                one_ahead.wall, one_ahead.cpu, one_blox.wall, one_blox.cpu, all_ahead.wall, all_ahead.cpu,
                all_blox.wall, all_blox.cpu);
  });
  simulation.run();
  std::printf("known: jobs submitted so far (copied by a fork); live: not done; run: running.\n"
              "4 h ahead: one forecast of accept_all + las; Blox rule: the same until its jobs are done, no arrivals.\n");
  return 0;
}
