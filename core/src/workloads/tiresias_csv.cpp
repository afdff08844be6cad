// `kind = "tiresias-csv"`: a job trace of Tiresias's simulator
// (SymbioticLab/Tiresias, simulator/*_job.csv), one job per row, with a
// header, read by parse_job_file in simulator/run_sim.py:
//
//   job_id       "17"                                    -> name
//   num_gpu      GPUs the job asks for                   -> gpus (= min_gpus = max_gpus)
//   submit_time  seconds since the start                 -> arrival
//   iterations   training iterations                     -> not used (checked)
//   model_name   vgg19, resnet50, ...                    -> model
//   duration     run time in seconds on num_gpu GPUs     -> TraceJob::duration
//   interval     seconds until the next job's submission -> not used (checked)
//
// Choices, from Tiresias's code and simulator/README.md:
// - duration alone sets a job's length: the simulator schedules a job's end
//   from it, and its README says no Tiresias policy relies on iterations.
//   No simulator code reads iterations or interval.
// - interval repeats what submit_time says (in 60_job.csv it is the gap to
//   the next row's submit_time); submit_time is the one Tiresias reads, so
//   it is the one we trust.
// - A job must ask for a GPU and last a positive time; rows that do not are
//   errors, as they would make no sense to Tiresias either.
// - Tiresias truncates durations to whole seconds (jobs.py); fractions are
//   kept here, as the other kinds keep them.
#include <unordered_map>

#include "common/csv_table.hpp"
#include "workloads/kinds.hpp"

namespace tessel {

namespace {

class TiresiasCsvWorkload final : public WorkloadSource {
 public:
  explicit TiresiasCsvWorkload(std::string path) : path_(std::move(path)) {}

  Trace read(std::uint64_t) const override {
    CsvTable table(path_, {"job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration", "interval"},
                   {});
    Trace trace;
    std::unordered_map<std::string, std::size_t> first_line;  // by job_id: Tiresias's simulator keys its jobs by it
    while (table.next()) {
      TraceJob job;
      JobSpec& spec = job.spec;
      spec.name = table.required_text("job_id");
      if (const auto [seen, added] = first_line.emplace(spec.name, table.line()); !added)
        table.fail("job_id", "job '" + spec.name + "' is given again (first on line " + std::to_string(seen->second) +
                                 ")");
      spec.gpus = spec.min_gpus = spec.max_gpus = static_cast<int>(table.integer("num_gpu", 1, 1 << 20));
      spec.arrival = table.number("submit_time", 0);
      table.integer("iterations", 0);  // checked, not used
      spec.model = table.required_text("model_name");
      job.duration = table.positive_number("duration");
      table.number("interval", 0);  // checked, not used
      trace.jobs.push_back(std::move(job));
    }
    return trace;
  }

 private:
  std::string path_;
};

}  // namespace

std::unique_ptr<WorkloadSource> parse_tiresias_csv_workload(TableReader& reader) {
  return std::make_unique<TiresiasCsvWorkload>(reader.input_path("path", std::nullopt).value_or(""));
}

}  // namespace tessel
