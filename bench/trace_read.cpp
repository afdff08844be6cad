// bench/trace_read: how fast the trace readers parse the real traces.
//
// Reads each trace of ../shared/data (or of the directory given as the first
// argument) five times through its workload kind and prints the best wall
// time. Target: pollux/philly.csv (82,247 jobs) well under 0.3 s.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "config/experiment.hpp"
#include "workloads/workload.hpp"

using namespace tessel;

namespace {

struct TraceFile {
  const char* kind;
  const char* path;  // under the data directory
};

constexpr TraceFile kTraces[] = {
    {"pollux-csv", "pollux/philly.csv"},
    {"pollux-workload", "pollux/workloads/workload-1.csv"},
    {"tiresias-csv", "tiresias/60_job.csv"},
    {"openb", "alibaba-openb/openb_pod_list_default.csv"},
};

std::shared_ptr<const WorkloadSource> source_for(const TraceFile& trace, const std::filesystem::path& file) {
  const std::string toml = "[cluster]\nnodes = 1\ngpus_per_node = 8\n[workload]\nkind = \"" +
                           std::string(trace.kind) + "\"\npath = \"" + file.string() +
                           "\"\n[scheduler]\nallocation = { plugin = \"fifo\" }\n"
                           "placement = { plugin = \"first_fit\" }\n";
  return build_workload_source(
      read_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(toml, "trace_read"))).workload);
}

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path data = argc > 1 ? argv[1] : "../shared/data";
  std::printf("trace_read: best of 5 reads, from %s\n", data.c_str());
  std::printf("%-16s  %-42s  %8s  %10s  %12s\n", "kind", "file", "jobs", "wall (ms)", "jobs/s");
  for (const TraceFile& trace : kTraces) {
    const std::filesystem::path file = data / trace.path;
    if (!std::filesystem::exists(file)) {
      std::printf("%-16s  %-42s  absent\n", trace.kind, trace.path);
      continue;
    }
    const auto source = source_for(trace, file);
    double best = 1e300;
    std::size_t jobs = 0;
    for (int i = 0; i < 5; ++i) {
      const auto start = std::chrono::steady_clock::now();
      jobs = source->read(1).jobs.size();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::printf("%-16s  %-42s  %8zu  %10.2f  %12.0f\n", trace.kind, trace.path, jobs, best * 1e3, jobs / best);
    if (std::string(trace.path) == "pollux/philly.csv")
      std::printf("  philly.csv in %.3f s (target < 0.3 s): %s\n", best, best < 0.3 ? "met" : "MISSED");
  }
  return 0;
}
