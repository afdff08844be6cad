// bench/philly_replay: a Philly-scale replay.
//
// All of pollux/philly.csv (82,247 jobs at their original arrival times) on
// the 2,490-GPU Philly cluster, FIFO + consolidated placement, with the
// placement-penalty throughput model. Prints the time to read and price the
// trace, the time to simulate it, events per second and peak RSS.
// Targets (issue #3): reading under 0.3 s, the whole replay under 3 s.
// Then the time-sensitive policies as experiments/philly-replay runs them
// (60-s rounds, every one of them held, the linear model): LAS and 2D-LAS
// (tiresias, one threshold of 3,600 GPU-s). Target (issue 17): each under 1 s.
// Usage: build/bench/philly_replay [DATA_DIR]   (default ../shared/data)
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "config/experiment.hpp"
#include "workloads/workload.hpp"
#include "plugins/registry.hpp"
#include "simulation.hpp"

using namespace tessel;

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path data = argc > 1 ? argv[1] : "../shared/data";
  const std::filesystem::path trace = data / "pollux/philly.csv";
  if (!std::filesystem::exists(trace)) {
    std::printf("philly_replay: %s not found; nothing to measure\n", trace.c_str());
    return 0;
  }
  const std::string toml = R"([cluster]
preset = "philly"
[workload]
kind = "pollux-csv"
path = ")" + trace.string() + R"("
model = { name = "placement-penalty" }
[scheduler]
round_seconds = 300
allocation = { plugin = "fifo" }
placement = { plugin = "consolidated" }
)";
  const ExperimentConfig config =
      read_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(toml, "philly_replay")));
  PluginRegistry registry;

  auto start = std::chrono::steady_clock::now();
  const Workload workload = build_workload(config.workload, ClusterState(config.cluster.nodes));
  const double read_seconds = seconds_since(start);

  start = std::chrono::steady_clock::now();
  Simulation simulation(config, registry);  // reads the trace again, as every run does
  const RunResults results = simulation.run();
  const double replay_seconds = seconds_since(start);

  double jct = 0, queueing = 0;
  std::size_t finished = 0;
  for (const JobRecord& job : results.jobs)
    if (job.finish && job.status == "finished") {
      jct += *job.finish - job.arrival;
      queueing += *job.first_start - job.arrival;
      ++finished;
    }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("philly_replay: %zu jobs of pollux/philly.csv on the Philly cluster (2,490 GPUs), "
              "FIFO + consolidated, placement-penalty\n", workload.jobs.size());
  std::printf("  read and price the trace  %7.3f s   (target < 0.3 s: %s)\n", read_seconds,
              read_seconds < 0.3 ? "met" : "MISSED");
  std::printf("  whole replay              %7.3f s   (target < 3 s: %s)\n", replay_seconds,
              replay_seconds < 3 ? "met" : "MISSED");
  std::printf("  events                    %7llu     (%.0f per second)\n",
              static_cast<unsigned long long>(results.events), results.events / replay_seconds);
  std::printf("  finished jobs             %7zu     avg JCT %.2f h, avg queueing %.2f h\n", finished,
              jct / finished / 3600, queueing / finished / 3600);
  std::printf("  peak RSS                  %7.1f MB\n", usage.ru_maxrss / 1024.0);

  for (const char* allocation :
       {"{ plugin = \"las\" }", "{ plugin = \"tiresias\", queue_thresholds_gpu_seconds = [3600], promote_knob = 0 }"}) {
    const std::string policy_toml = R"([cluster]
preset = "philly"
[workload]
kind = "pollux-csv"
path = ")" + trace.string() + R"("
model = "linear"
[scheduler]
round_seconds = 60
allocation = )" + allocation + R"(
placement = { plugin = "consolidated" }
[simulation]
completion = "exact"
preemption_overhead_seconds = 0
)";
    const ExperimentConfig policy_config =
        read_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(policy_toml, "philly_replay")));
    start = std::chrono::steady_clock::now();
    Simulation policy_run(policy_config, registry);
    const RunResults policy_results = policy_run.run();
    const double seconds = seconds_since(start);
    std::printf("  %-24s  %7.3f s   (target < 1 s: %s), %llu events, %.2f us/event\n",
                policy_config.scheduler.stage(PluginKind::allocation).plugin.c_str(), seconds, seconds < 1 ? "met" : "MISSED",
                static_cast<unsigned long long>(policy_results.events), seconds / policy_results.events * 1e6);
  }
  return 0;
}
