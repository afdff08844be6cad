// `kind = "csv"`: a plain trace for hand-made workloads. One job per row,
// with a header naming the columns:
//   arrival   seconds since the start                      (required)
//   gpus      GPUs requested                                (required)
//   duration  seconds on `gpus` GPUs of the reference type  (required)
//   name, tenant, vc, model, min_gpus, max_gpus, gpu_milli, cpus, mem_gb, priority,
//   batch_size, parameters                                   (optional)
// Blank lines and lines starting with '#' are skipped.
#include "common/csv_table.hpp"
#include "workloads/kinds.hpp"

namespace tessel {

namespace {

class CsvWorkload final : public WorkloadSource {
 public:
  explicit CsvWorkload(std::string path) : path_(std::move(path)) {}

  Trace read(std::uint64_t) const override {
    CsvTable table(path_, {"arrival", "gpus", "duration"},
                   {"name", "tenant", "vc", "model", "min_gpus", "max_gpus", "gpu_milli", "cpus",
                    "mem_gb", "priority", "batch_size", "parameters"});
    Trace trace;
    while (table.next()) {
      TraceJob job;
      JobSpec& spec = job.spec;
      spec.arrival = table.number("arrival", 0);
      spec.gpus = static_cast<int>(table.integer("gpus", 1, 1 << 20));
      job.duration = table.positive_number("duration");
      spec.name = table.text("name");
      spec.tenant = table.text("tenant");
      spec.vc = table.text("vc");
      spec.model = table.text("model");
      spec.min_gpus = static_cast<int>(table.optional_integer("min_gpus", 1, spec.gpus).value_or(spec.gpus));
      spec.max_gpus = static_cast<int>(table.optional_integer("max_gpus", spec.gpus, 1 << 20).value_or(spec.gpus));
      spec.gpu_milli = static_cast<int>(table.optional_integer("gpu_milli", 1, 1000).value_or(1000));
      spec.cpus = table.optional_number("cpus", 0).value_or(0);
      spec.mem_gb = table.optional_number("mem_gb", 0).value_or(0);
      spec.priority = table.optional_number("priority", 0).value_or(1);
      spec.batch_size = static_cast<int>(table.optional_integer("batch_size", 1, 1 << 24).value_or(0));
      spec.parameters = table.optional_number("parameters", 0).value_or(0);
      trace.jobs.push_back(std::move(job));
    }
    return trace;
  }

 private:
  std::string path_;
};

}  // namespace

std::unique_ptr<WorkloadSource> parse_csv_workload(TableReader& reader) {
  return std::make_unique<CsvWorkload>(reader.input_path("path", std::nullopt).value_or(""));
}

}  // namespace tessel
