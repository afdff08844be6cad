// `kind = "pollux-csv"`: the job list derived from Microsoft's Philly trace
// that Pollux's artifact ships (petuum/adaptdl, branch osdi21-artifact,
// simulator/traces/philly.csv), one job per row, with a header:
//
//   timestamp  submit time, "YYYY-MM-DD HH:MM:SS"  -> arrival: seconds after the earliest timestamp of the file
//   duration   run time in seconds on num_gpus     -> TraceJob::duration
//   num_gpus   GPUs the job held                   -> gpus (= min_gpus = max_gpus: Philly jobs were rigid)
//   gpu_time   duration x num_gpus                 -> not used (checked as a number)
//   cluster    Philly virtual cluster id           -> vc
//
// Choices:
// - Rows of 0 GPUs or of 0 seconds are skipped with a note counting each
//   kind: such a job neither asks for a GPU nor has work to price. The
//   shipped file has none.
// - The earliest timestamp is taken over every row, skipped ones included,
//   so that arrivals keep the trace's own clock.
// - gpu_time is redundant (it equals duration x num_gpus on every row of the
//   shipped file); reading it would give a second, possibly disagreeing,
//   source for the job's size.
// - The file names no jobs: names stay empty.
// - Pollux's own generator (simulator/workload.py) samples this file after
//   dropping jobs under 60 s or over 1000 GPU-hours; this reader keeps every
//   job, and [workload] transforms cut it down.
#include <algorithm>
#include <limits>

#include "common/csv_table.hpp"
#include "workloads/kinds.hpp"
#include "workloads/timestamps.hpp"

namespace tessel {

namespace {

class PolluxCsvWorkload final : public WorkloadSource {
 public:
  explicit PolluxCsvWorkload(std::string path) : path_(std::move(path)) {}

  Trace read(std::uint64_t) const override {
    CsvTable table(path_, {"timestamp", "duration", "num_gpus", "gpu_time", "cluster"}, {});
    Trace trace;
    double earliest = std::numeric_limits<double>::infinity();
    std::size_t without_gpus = 0, without_time = 0;
    while (table.next()) {
      const double submitted = submit_time(table);
      earliest = std::min(earliest, submitted);
      const double duration = table.number("duration", 0);
      const auto gpus = table.integer("num_gpus", 0, 1 << 20);
      table.number("gpu_time", 0);  // checked, not used
      if (gpus == 0) {
        ++without_gpus;
        continue;
      }
      if (duration == 0) {
        ++without_time;
        continue;
      }
      TraceJob job;
      job.spec.arrival = submitted;  // made relative once the earliest is known
      job.spec.gpus = job.spec.min_gpus = job.spec.max_gpus = static_cast<int>(gpus);
      job.spec.vc = table.text("cluster");
      job.duration = duration;
      trace.jobs.push_back(std::move(job));
    }
    for (TraceJob& job : trace.jobs) job.spec.arrival -= earliest;
    if (without_gpus > 0) trace.notes.push_back("skipped " + count_text(without_gpus) + " jobs of 0 GPUs");
    if (without_time > 0) trace.notes.push_back("skipped " + count_text(without_time) + " jobs of 0 seconds");
    return trace;
  }

 private:
  static double submit_time(const CsvTable& table) {
    const std::string_view text = table.text("timestamp");
    const std::optional<double> seconds = parse_timestamp(text);
    if (!seconds) table.fail("timestamp", "expected a time 'YYYY-MM-DD HH:MM:SS', got '" + std::string(text) + "'");
    return *seconds;
  }

  std::string path_;
};

}  // namespace

std::unique_ptr<WorkloadSource> parse_pollux_csv_workload(TableReader& reader) {
  return std::make_unique<PolluxCsvWorkload>(reader.input_path("path", std::nullopt).value_or(""));
}

}  // namespace tessel
