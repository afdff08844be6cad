// bench/sim_throughput: how fast the simulated cluster runs.
//
// A synthetic workload (Gavel's generator) on a cluster the size of
// Microsoft's Philly cluster (321 nodes x 2 GPUs + 231 nodes x 8 GPUs, 2,490
// GPUs), FIFO + consolidated placement, at 10k and 100k jobs. Prints wall
// time, events per second, peak RSS, and how time grows with the job count.
// Targets (issue #2): 100k jobs in under 2 s and 300 MB; 10x the jobs for at
// most 15x the time.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "config/experiment.hpp"
#include "plugins/registry.hpp"
#include "simulation.hpp"

using namespace tessel;

namespace {

ExperimentConfig philly_experiment(long jobs, double jobs_per_hour) {
  const std::string toml = R"([cluster]
nodes = 1
gpus_per_node = 1
[workload]
kind = "synthetic"
seed = 1
jobs = )" + std::to_string(jobs) + "\njobs_per_hour = " + std::to_string(jobs_per_hour) + R"(
[scheduler]
round_seconds = 300
allocation = { plugin = "fifo" }
placement = { plugin = "consolidated" }
)";
  ExperimentConfig config =
      read_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(toml, "sim_throughput")));
  config.cluster.nodes.clear();
  for (int i = 0; i < 321 + 231; ++i) {
    NodeSpec node;
    node.name = "m" + std::to_string(i);
    node.gpus = i < 321 ? 2 : 8;
    node.gpu_type = i < 321 ? "k80" : "p100";
    node.rack = i / 32;
    config.cluster.nodes.push_back(node);
  }
  return config;
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

struct Figures {
  double seconds;
  std::uint64_t events;
  double avg_jct_hours;
};

Figures measure(long jobs, double jobs_per_hour, PluginRegistry& registry) {
  const ExperimentConfig config = philly_experiment(jobs, jobs_per_hour);
  const auto start = std::chrono::steady_clock::now();
  Simulation simulation(config, registry);
  const RunResults results = simulation.run();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double jct = 0;
  for (const JobRecord& job : results.jobs) jct += job.finish.value_or(0) - job.arrival;
  return {seconds, results.events, jct / static_cast<double>(jobs) / 3600};
}

}  // namespace

int main(int argc, char** argv) {
  const double jobs_per_hour = argc > 1 ? std::atof(argv[1]) : 60;  // ~75% of the cluster's GPU-hours
  PluginRegistry registry;
  std::printf("sim_throughput: FIFO + consolidated, 552 nodes / 2,490 GPUs, synthetic at %.0f jobs/h\n",
              jobs_per_hour);
  std::printf("%8s  %9s  %9s  %12s  %11s  %13s\n", "jobs", "wall (s)", "events", "events/s", "avg JCT (h)",
              "peak RSS (MB)");
  const Figures small = measure(10'000, jobs_per_hour, registry);
  std::printf("%8d  %9.3f  %9llu  %12.0f  %11.2f  %13.1f\n", 10'000, small.seconds,
              static_cast<unsigned long long>(small.events), small.events / small.seconds, small.avg_jct_hours,
              peak_rss_mb());
  const Figures large = measure(100'000, jobs_per_hour, registry);
  const double rss = peak_rss_mb();
  std::printf("%8d  %9.3f  %9llu  %12.0f  %11.2f  %13.1f\n", 100'000, large.seconds,
              static_cast<unsigned long long>(large.events), large.events / large.seconds, large.avg_jct_hours,
              rss);
  const double growth = large.seconds / small.seconds;
  std::printf("growth: 10x the jobs took %.1fx the time (target <= 15x): %s\n", growth,
              growth <= 15 ? "met" : "MISSED");
  std::printf("100k jobs: %.2f s (target < 2 s): %s; peak RSS %.0f MB (target < 300 MB): %s\n", large.seconds,
              large.seconds < 2 ? "met" : "MISSED", rss, rss < 300 ? "met" : "MISSED");
  return 0;
}
