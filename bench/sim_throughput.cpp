// bench/sim_throughput: how fast the simulated cluster runs.
//
// A synthetic workload (Gavel's generator) on a cluster the size of
// Microsoft's Philly cluster (321 nodes x 2 GPUs + 231 nodes x 8 GPUs, 2,490
// GPUs), FIFO + consolidated placement, at 10k and 100k jobs (and 1M with
// --million). Prints wall time, microseconds per event, events per second,
// peak RSS, and how time grows with the job count.
// Targets (issue 17): 100k jobs under 1 us an event and 0.3 s in all; 1M jobs
// under 3 s and 1 GiB peak RSS; 100x the jobs (10k to 1M) for at most 110x
// the time. Measured (27 November, shared 2-core machine): 100k jobs
// 0.42-0.46 s, 1.9-2.1 us an event (0.27-0.29x the build before issue 17 in
// the same runs); 1M jobs 4.5-5.0 s, 2.0-2.3 us an event, 1,005 MiB; growth
// 76-116x over three runs. 28 November, after the engine steps of issue 17
// (one pass accounts the running jobs before a round; a sorted trace is not
// sorted again): `--jobs 100000` 2,130.7 million instructions under callgrind,
// 0.74x the 2,871.6 million before them; in three runs interleaved with that
// build on the loaded machine, 100k jobs 0.64-0.79x its time and 1M jobs 0.76x
// (5.5 s against 7.3 s), 1,004 MiB either way. What is left each round is
// still accounting every running job (about 30 instructions each): plugins
// read a job's progress from its JobState, so it must be current at a round.
// After lazy progress (fifo, consolidated, accept_all and none declare
// Plugin::reads_progress() false, so rounds leave running jobs alone):
// `--jobs 100000` 1,125.9 million instructions, 0.53x the 2,129.4 million
// before it; interleaved on the loaded machine, 100k jobs 0.68x its time
// (1.2 s against 1.8 s) and 1M jobs 0.56x (10.2 s against 18.1 s).
// Memory, 28 November: `--jobs 1000000` peak RSS 573 MiB, 1,004 before
// (about 1 KB a job: every spec held twice, and every job's state beside its
// row at the end); `--jobs 100000` 108 MiB (113), 1,105.3 million
// instructions (1,125.9).
//
//   build/bench/sim_throughput [--million] [--jobs N] [jobs/h]
// --jobs N runs that one size alone (for `valgrind --tool=callgrind`, whose
// instruction counts, unlike times, do not move with the machine's load).
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

// One line of the table; peak RSS is the process's so far (sizes run smallest first).
Figures print_row(long jobs, double jobs_per_hour, PluginRegistry& registry) {
  const Figures figures = measure(jobs, jobs_per_hour, registry);
  std::printf("%8ld  %9.3f  %9llu  %8.2f  %12.0f  %11.2f  %13.1f\n", jobs, figures.seconds,
              static_cast<unsigned long long>(figures.events), figures.seconds / figures.events * 1e6,
              figures.events / figures.seconds, figures.avg_jct_hours, peak_rss_mb());
  return figures;
}

const char* verdict(bool met) { return met ? "met" : "MISSED"; }

}  // namespace

int main(int argc, char** argv) {
  bool million = false;
  long only = 0;
  double jobs_per_hour = 60;  // ~75% of the cluster's GPU-hours
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--million") {
      million = true;
    } else if (arg == "--jobs" && i + 1 < argc) {
      only = std::atol(argv[++i]);
    } else if (!arg.empty() && arg[0] != '-') {
      jobs_per_hour = std::atof(arg.c_str());
    } else {
      std::fprintf(stderr, "usage: sim_throughput [--million] [--jobs N] [jobs/h]\n");
      return 2;
    }
  }
  PluginRegistry registry;
  std::printf("sim_throughput: FIFO + consolidated, 552 nodes / 2,490 GPUs, synthetic at %.0f jobs/h\n",
              jobs_per_hour);
  std::printf("%8s  %9s  %9s  %8s  %12s  %11s  %13s\n", "jobs", "wall (s)", "events", "us/event", "events/s",
              "avg JCT (h)", "peak RSS (MB)");
  if (only > 0) {
    print_row(only, jobs_per_hour, registry);
    return 0;
  }
  const Figures small = print_row(10'000, jobs_per_hour, registry);
  const Figures large = print_row(100'000, jobs_per_hour, registry);
  const double rss = peak_rss_mb();
  const double us_per_event = large.seconds / large.events * 1e6;
  std::printf("growth: 10x the jobs took %.1fx the time\n", large.seconds / small.seconds);
  std::printf("100k jobs: %.3f s (target < 0.3 s): %s; %.2f us/event (target < 1): %s; peak RSS %.0f MB\n",
              large.seconds, verdict(large.seconds < 0.3), us_per_event, verdict(us_per_event < 1), rss);
  if (!million) return 0;
  const Figures huge = print_row(1'000'000, jobs_per_hour, registry);
  const double huge_rss = peak_rss_mb();
  const double growth = huge.seconds / small.seconds;
  std::printf("1M jobs: %.2f s (target < 3 s): %s; %.2f us/event; peak RSS %.0f MB (target < 1024 MB): %s\n",
              huge.seconds, verdict(huge.seconds < 3), huge.seconds / huge.events * 1e6, huge_rss,
              verdict(huge_rss < 1024));
  std::printf("growth: 100x the jobs (10k to 1M) took %.1fx the time (target <= 110x): %s\n", growth,
              verdict(growth <= 110));
  return 0;
}
