// bench/philly_json_read: how fast the philly-json kind reads a log, and
// that its memory follows the jobs it keeps rather than the file's size.
//
// Writes a synthetic cluster_job_log shaped like Philly's (1-4 attempts,
// 1-16 GPUs on 8-GPU machines, some empty attempt lists and None times) to
// a temporary file, then reads it twice: through filters that keep almost
// nothing (the parse alone), then keeping every usable job. Prints MB/s,
// jobs/s and peak RSS. Run: build/bench/philly_json_read [jobs]
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "config/experiment.hpp"
#include "workloads/workload.hpp"

using namespace tessel;

namespace {

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

std::string philly_time(std::time_t seconds) {
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &utc);
  return text;
}

void write_log(const std::filesystem::path& path, long jobs) {
  std::mt19937_64 rng(1);
  auto below = [&](std::uint64_t n) { return rng() % n; };
  const char* statuses[] = {"Pass", "Killed", "Failed"};
  const int gpu_counts[] = {1, 1, 1, 1, 1, 1, 2, 4, 8, 16};
  std::ofstream out(path);
  out << "[";
  std::time_t submitted = 1502064000;  // 2017-08-07, where the trace begins
  for (long i = 0; i < jobs; ++i) {
    submitted += static_cast<std::time_t>(below(120));
    char ids[64];
    std::snprintf(ids, sizeof ids, "%06llx", static_cast<unsigned long long>(below(1 << 24)));
    out << (i ? ", " : "") << R"({"status": ")" << statuses[below(3)] << R"(", "vc": ")" << ids
        << R"(", "jobid": "application_1506638472019_)" << i << R"(", "attempts": [)";
    const int attempts = below(20) == 0 ? 0 : 1 + static_cast<int>(below(8) == 0 ? below(4) : 0);
    const int gpus = gpu_counts[below(10)];
    std::time_t start = submitted + static_cast<std::time_t>(below(600));
    for (int a = 0; a < attempts; ++a) {
      const std::time_t end = start + 60 + static_cast<std::time_t>(below(100'000));
      const bool still_running = a == attempts - 1 && below(50) == 0;
      out << (a ? ", " : "") << R"({"start_time": ")" << philly_time(start) << R"(", "end_time": ")"
          << (still_running ? "None" : philly_time(end)) << R"(", "detail": [)";
      for (int placed = 0; placed < gpus; placed += 8) {
        out << (placed ? ", " : "") << R"({"ip": "m)" << below(552) << R"(", "gpus": [)";
        for (int g = 0; g < std::min(8, gpus - placed); ++g) out << (g ? ", " : "") << "\"gpu" << g << '"';
        out << "]}";
      }
      out << "]}";
      start = end + static_cast<std::time_t>(below(60));
    }
    out << R"(], "submitted_time": ")" << philly_time(submitted) << R"(", "user": ")" << ids << R"("})"
        << "\n";
  }
  out << "]\n";
}

struct Figures {
  double seconds;
  std::size_t kept;
};

Figures measure(const std::filesystem::path& log, const std::string& filters) {
  const std::string toml = "[cluster]\nnodes = 1\ngpus_per_node = 8\n[workload]\nkind = \"philly-json\"\npath = \"" +
                           log.string() + "\"\n" + filters +
                           "[scheduler]\nallocation = { plugin = \"fifo\" }\nplacement = { plugin = \"first_fit\" }\n";
  const ExperimentConfig config =
      read_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(toml, "philly_json_read")));
  const auto start = std::chrono::steady_clock::now();
  const Trace trace = build_workload_source(config.workload)->read(1);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {seconds, trace.jobs.size()};
}

}  // namespace

int main(int argc, char** argv) {
  const long jobs = argc > 1 ? std::atol(argv[1]) : 1'000'000;
  const auto log = std::filesystem::temp_directory_path() /
                   ("tessel-philly-bench-" + std::to_string(::getpid()) + ".json");
  write_log(log, jobs);
  const double megabytes = static_cast<double>(std::filesystem::file_size(log)) / 1e6;
  std::printf("philly_json_read: %ld jobs, %.1f MB of JSON; peak RSS before reading %.1f MB\n", jobs, megabytes,
              peak_rss_mb());
  std::printf("%-34s  %9s  %8s  %10s  %9s  %13s\n", "read", "kept", "wall (s)", "jobs/s", "MB/s", "peak RSS (MB)");
  auto report = [&](const char* what, const Figures& f) {
    std::printf("%-34s  %9zu  %8.2f  %10.0f  %9.1f  %13.1f\n", what, f.kept, f.seconds,
                static_cast<double>(jobs) / f.seconds, megabytes / f.seconds, peak_rss_mb());
  };
  report("parse only (filters keep ~nothing)", measure(log, "min_duration_seconds = 1e12\n"));
  report("keep every usable job", measure(log, ""));
  std::filesystem::remove(log);
  return 0;
}
