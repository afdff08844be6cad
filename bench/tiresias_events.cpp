// bench/tiresias_events: 2D-LAS and 2D-Gittins with rounds at events against
// one-second rounds, on the trace shape of Tiresias's testbed runs.
//
// The trace: Tiresias's run script (simulator/sim_runs.sh) runs a 480-job
// trace on n15g4 (15 x 4 GPUs, the 60-GPU testbed); that trace is not
// published, so we take the 480 jobs of pollux/philly.csv that
// experiments/tiresias/testbed.toml runs: its [workload], read as tessel
// runs it (the rows sorted by submit time, stably; its window holds indices
// 62,000 to 62,479 and counts submit times from the first of them). GPU
// counts are the trace's (at most 32 in these rows), durations whole seconds
// (Tiresias's jobs.py truncates them; these are whole already). The jobs
// arrive over 20 h; their longest one
// ends the run near 866,000 s (about 10 days). The trace is written in
// Tiresias's CSV format (job_id,num_gpu,submit_time,iterations,model_name,
// duration,interval) and tessel reads that file (`tiresias-csv`), so both
// simulators run the same jobs.
//
// The runs: the `-sim` policies of experiments/tiresias/production.toml
// (Tiresias's simulator's rules: queue limits 3,250 and 7,200 GPU-seconds,
// entry order within a 2D-LAS queue, Gittins indices rounded as
// cal_r_gittins_index does with yarn-gput1000.csv and delta 3,250, the
// running set re-selected by GPU count), `consolidated` placement, the
// linear model, no preemption cost, on experiments/tiresias/n15g4.csv; each
// with `[simulation] rounds = "events"` and with one-second rounds. Printed:
// wall and CPU time of each run, microseconds per simulation event, the
// one-second run's time over the event run's, and whether each policy's
// per-job results (first start, finish, preemptions) are the same both ways.
//
// Tiresias's own simulator on the same jobs (SymbioticLab/Tiresias, not part
// of tessel): write the trace with --write-trace 480_philly.csv, copy it and
// experiments/tiresias/n15g4.csv into its simulator/ directory, and there,
// with Python 2.7 (its README asks for it; its jobs.py imports numpy for one
// numpy.mean, which a one-line stand-in module on PYTHONPATH can provide
// where Python 2's numpy is missing), time
//   python2.7 run_sim.py --cluster_spec=n15g4.csv --scheme=count
//       --trace_file=480_philly.csv --schedule=dlas-gpu --log_path=out-las
// (one command line; --schedule=dlas-gpu-gittins for 2D-Gittins, which reads
// yarn-gput1000.csv from its own directory) with /usr/bin/time.
//
// Measured on 28 November 2026 on the 2-core machine shared with other
// sessions (load about 8, so CPU time is the figure to compare; three runs
// each): Tiresias's simulator 0.30-0.39 s CPU (1.4-1.9 s wall) for dlas-gpu
// and 1.09-1.38 s CPU (4.1-6.4 s wall) for dlas-gpu-gittins, its whole process;
// tessel at events 0.008-0.010 s CPU (0.02-0.04 s wall) for either, reading
// the trace included: 30-48x less CPU for 2D-LAS, 100-170x for 2D-Gittins
// (target: 10x). Both end the run at 866,514 s under 2D-LAS. One-second
// rounds take 0.5-0.76 s CPU and 51-97x the event runs' CPU. 2D-LAS at
// events gives the one-second run's per-job results at whole-second limits;
// at 3,250 and 7,200 GPU-s 13 of 480 jobs differ (job 34: 191,019.25 s
// against 191,020 s), by crossings between whole seconds that the clock sees
// up to a second late.
// 2D-Gittins may differ either way: it re-reads each job's index only at
// rounds (gittins.cpp), each second on the clock.
//
// Usage: build/bench/tiresias_events [--data DIR] [--write-trace PATH]
//   --data DIR          where pollux/ and tiresias/ are (default ../shared/data)
//   --write-trace PATH  also keep the 480-job trace at PATH (Tiresias's CSV format)
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/experiment.hpp"
#include "plugins/registry.hpp"
#include "simulation.hpp"
#include "workloads/workload.hpp"

using namespace tessel;

namespace {

constexpr std::size_t kJobs = 480;
constexpr const char* kTestbed = "experiments/tiresias/testbed.toml";

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// testbed.toml's jobs, with its trace path set to `philly`, in Tiresias's
// job CSV at `path`. Under the `linear` model a job's work is GPU-seconds
// (it runs at one unit a second per GPU, models/linear.cpp), so its duration
// is its work over its GPUs.
void write_trace(const std::filesystem::path& philly, const std::filesystem::path& path) {
  const ExperimentConfig config = read_experiment(
      std::make_shared<TomlDocument>(TomlDocument::load(kTestbed, {"workload.path=\"" + philly.string() + "\""})));
  if (config.workload.model.name != "linear")
    throw std::runtime_error(std::string(kTestbed) + ": expected the linear model, whose work is GPU-seconds");
  const Workload workload = build_workload(config.workload, ClusterState(config.cluster.nodes));
  if (workload.jobs.size() != kJobs)
    throw std::runtime_error(std::string(kTestbed) + " selects " + std::to_string(workload.jobs.size()) +
                             " jobs of " + philly.string() + ", not " + std::to_string(kJobs));
  std::ofstream out(path);
  out << "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n";
  for (std::size_t i = 0; i < kJobs; ++i) {
    const JobSpec& job = workload.jobs[i];
    const long submit = std::lround(std::floor(job.arrival));
    const long next = i + 1 < kJobs ? std::lround(std::floor(workload.jobs[i + 1].arrival)) : submit;
    const long duration = std::max(1L, std::lround(std::floor(job.total_work / job.gpus)));
    // iterations and model_name are read by neither simulator's 2D policies.
    out << i << ',' << job.gpus << ',' << submit << ',' << duration << ",resnet50," << duration << ','
        << next - submit << '\n';
  }
  if (!out.flush()) throw std::runtime_error("cannot write " + path.string());
}

struct Run {
  RunResults results;
  double wall = 0, cpu = 0;
};

Run simulate(const std::filesystem::path& trace, const std::string& allocation,
             bool events) {
  const std::string toml = R"([cluster]
tiresias_spec = "experiments/tiresias/n15g4.csv"
[workload]
kind = "tiresias-csv"
path = ")" + trace.string() + R"("
model = "linear"
[scheduler]
round_seconds = 1
allocation = )" + allocation + R"(
placement = { plugin = "consolidated" }
[simulation]
completion = "exact"
preemption_overhead_seconds = 0
)" + (events ? "rounds = \"events\"\n" : "");
  const ExperimentConfig config =
      read_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(toml, "tiresias_events")));
  PluginRegistry registry;
  Run run;
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = cpu_seconds();
  Simulation simulation(config, registry);
  run.results = simulation.run();
  run.cpu = cpu_seconds() - cpu_start;
  run.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

// "identical", or how many jobs differ and the first of them.
std::string compare(const RunResults& a, const RunResults& b) {
  std::size_t differ = 0;
  std::string first;
  for (std::size_t i = 0; i < a.jobs.size() && i < b.jobs.size(); ++i) {
    const JobRecord& x = a.jobs[i];
    const JobRecord& y = b.jobs[i];
    if (x.first_start == y.first_start && x.finish == y.finish && x.preemptions == y.preemptions &&
        x.status == y.status)
      continue;
    if (differ++ == 0) {
      char text[200];
      std::snprintf(text, sizeof text, "; first: job %llu finishes at %.3f s with %d preemptions against %.3f s with %d",
                    static_cast<unsigned long long>(x.id), x.finish.value_or(-1), x.preemptions,
                    y.finish.value_or(-1), y.preemptions);
      first = text;
    }
  }
  if (a.jobs.size() != b.jobs.size()) return "different job counts";
  return differ == 0 ? "identical" : std::to_string(differ) + " of " + std::to_string(a.jobs.size()) + " jobs differ" + first;
}

}  // namespace

int main(int argc, char** argv) {
  std::filesystem::path data = "../shared/data";
  std::filesystem::path keep;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if ((flag == "--data" || flag == "--write-trace") && i + 1 < argc) {
      (flag == "--data" ? data : keep) = argv[++i];
    } else {
      std::fprintf(stderr, "tiresias_events: unknown or incomplete argument '%s'\n"
                           "usage: tiresias_events [--data DIR] [--write-trace PATH]\n", argv[i]);
      return 2;
    }
  }
  const std::filesystem::path philly = data / "pollux/philly.csv";
  const std::filesystem::path distribution = data / "tiresias/yarn-gput1000.csv";
  for (const auto& needed : {philly, distribution})
    if (!std::filesystem::exists(needed)) {
      std::printf("tiresias_events: %s not found; nothing to measure\n", needed.c_str());
      return 0;
    }
  const std::filesystem::path trace =
      keep.empty() ? std::filesystem::temp_directory_path() / "tessel-tiresias-events-480.csv" : keep;
  try {
    write_trace(philly, trace);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tiresias_events: %s\n", error.what());
    return 1;
  }
  std::printf("tiresias_events: the %zu jobs of %s, on n15g4 (60 GPUs); trace in Tiresias's format at %s\n", kJobs,
              kTestbed, trace.c_str());

  struct Policy {
    const char* name;
    std::string allocation;
    bool must_match = false;  // per-job results the same both ways
  };
  // Tiresias's queue limits put some crossings between whole seconds (3,250
  // GPU-s on 4 GPUs: 812.5 s), which a one-second clock sees up to a second
  // late, so those runs may differ there; limits that every GPU count of the
  // trace (1 to 32) divides, 3,200 and 7,200, keep every decision on a whole
  // second, and there the two must agree job for job.
  const Policy policies[] = {
      {"2D-LAS", "{ plugin = \"tiresias\", queue_thresholds_gpu_seconds = [3250, 7200], promote_knob = 0, "
                 "entry_order = true, selection = \"greedy_by_count\" }"},
      {"2D-Gittins", "{ plugin = \"gittins\", distribution = \"" + distribution.string() +
                         "\", delta = 3250, queue_thresholds_gpu_seconds = [3250, 7200], promote_knob = 0, "
                         "simulator_rounding = true, selection = \"greedy_by_count\" }"},
      {"2D-LAS at whole-second limits", "{ plugin = \"tiresias\", queue_thresholds_gpu_seconds = [3200, 7200], "
                                        "promote_knob = 0, entry_order = true, selection = \"greedy_by_count\" }",
       true},
  };
  for (const Policy& policy : policies) {
    const Run events = simulate(trace, policy.allocation, true);
    const Run clock = simulate(trace, policy.allocation, false);
    double makespan = 0;
    for (const JobRecord& job : events.results.jobs) makespan = std::max(makespan, job.finish.value_or(0));
    for (const auto& [label, run] : {std::pair<const char*, const Run&>{"rounds at events", events},
                                     std::pair<const char*, const Run&>{"one-second rounds", clock}})
      std::printf("  %-29s %-17s wall %7.3f s  CPU %7.3f s  %9llu events  %6.2f us/event\n", policy.name, label,
                  run.wall, run.cpu, static_cast<unsigned long long>(run.results.events),
                  run.cpu / static_cast<double>(run.results.events) * 1e6);
    const std::string same = compare(events.results, clock.results);
    std::printf("  %-29s one-second rounds / events: %.1fx wall, %.1fx CPU; simulated %.0f s; per-job results: %s%s\n",
                policy.name, clock.wall / events.wall, clock.cpu / events.cpu, makespan, same.c_str(),
                policy.must_match ? (same == "identical" ? " (must be: met)" : " (must be: MISSED)") : "");
  }
  return 0;
}
