// `kind = "gavel-trace"`: a trace in Gavel's own format (stanford-futuredata/
// gavel, scheduler/traces/*.trace). Gavel writes a job as its Job.__str__
// (scheduler/job.py) followed by the arrival time (scheduler/scripts/utils/
// generate_trace.py) and reads it back by splitting each line on tabs
// (parse_trace in scheduler/utils.py). So: no header, ten tab-separated
// fields per line:
//
//   job_type           "ResNet-50 (batch size 64)"       -> model (a gavel-table profile)
//   command            the training command              -> not used
//   working_directory  where the command runs            -> not used
//   num_steps_arg      the command's step-count flag     -> not used
//   needs_data_dir     0 or 1                            -> not used (checked)
//   total_steps        steps the whole job must run      -> total_work, in steps
//   scale_factor       GPUs the job runs on              -> gpus (= min_gpus = max_gpus)
//   priority_weight    written as an integer, 1 or 5     -> priority
//   SLO                written "%f"; negative = none     -> not used (see below)
//   arrival_time       seconds since the start           -> arrival
//
// Choices:
// - total_steps is Gavel's size of the job, in steps of its job type at its
//   scale factor; tessel keeps it as the job's work, which the gavel-table
//   model prices in steps per second. The linear model would read the same
//   number as GPU-seconds, so pair this kind with gavel-table.
// - Gavel treats an SLO >= 0 as a deadline of SLO x the job's isolated
//   duration. tessel has no deadlines: such jobs are kept, the SLO is
//   dropped, and a note counts them.
// - Gavel asserts scale_factor >= 1; so do we, and priority_weight must be
//   positive to weigh anything.
// - Fields are split as CsvTable splits them: a double quote inside the
//   command opens a quoted span. Gavel's shipped traces hold none.
#include "common/csv_table.hpp"
#include "workloads/kinds.hpp"

namespace tessel {

namespace {

// The fields of a line, in the order parse_trace unpacks them.
const std::vector<std::string> kGavelColumns{"job_type",       "command",     "working_directory", "num_steps_arg",
                                             "needs_data_dir", "total_steps", "scale_factor",      "priority_weight",
                                             "SLO",            "arrival_time"};

class GavelTraceWorkload final : public WorkloadSource {
 public:
  explicit GavelTraceWorkload(std::string path) : path_(std::move(path)) {}

  Trace read(std::uint64_t) const override {
    CsvTable table(path_, kGavelColumns, {}, CsvFormat{'\t', kGavelColumns});
    Trace trace;
    std::size_t with_slo = 0;
    while (table.next()) {
      TraceJob job;
      JobSpec& spec = job.spec;
      spec.model = table.required_text("job_type");
      table.integer("needs_data_dir", 0, 1);  // checked, not used
      spec.total_work = static_cast<double>(table.integer("total_steps", 1));
      spec.gpus = spec.min_gpus = spec.max_gpus = static_cast<int>(table.integer("scale_factor", 1, 1 << 20));
      spec.priority = table.positive_number("priority_weight");
      if (table.number("SLO") >= 0) ++with_slo;
      spec.arrival = table.number("arrival_time", 0);
      trace.jobs.push_back(std::move(job));
    }
    if (with_slo > 0)
      trace.notes.push_back("ignored the SLO of " + count_text(with_slo) + " jobs: tessel has no deadlines");
    return trace;
  }

 private:
  std::string path_;
};

}  // namespace

std::unique_ptr<WorkloadSource> parse_gavel_trace_workload(TableReader& reader) {
  return std::make_unique<GavelTraceWorkload>(reader.input_path("path", std::nullopt).value_or(""));
}

}  // namespace tessel
