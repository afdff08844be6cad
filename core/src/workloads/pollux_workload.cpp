// `kind = "pollux-workload"`: a job list of the Pollux (OSDI'21) evaluation
// (petuum/adaptdl, branch osdi21-artifact, simulator/workloads/workload-N.csv),
// one job per row, with a header:
//
//   name          "cifar10-0"                         -> name
//   time          arrival, seconds since the start    -> arrival
//   application   cifar10, ncf, bert, ...             -> model (a pollux-apps profile)
//   num_replicas  GPUs the user asked for             -> gpus (= min_gpus = max_gpus)
//   batch_size    global batch size the user asked for -> batch_size
//
// Choices:
// - The rows give no duration: a job lasts until its application converges,
//   which only the throughput model knows. Duration and total_work stay 0
//   and build_workload asks ThroughputModel::default_work (pollux-apps
//   answers; linear cannot, and refuses such jobs).
// - The request is rigid here. In Pollux's simulator (simulator/simulator.py)
//   only the baselines honour it (Tiresias both numbers, Optimus the batch
//   size); Pollux picks both itself. Widening [min_gpus, max_gpus] is the
//   business of elasticity plugins, not of the trace.
#include <limits>

#include "common/csv_table.hpp"
#include "workloads/kinds.hpp"

namespace tessel {

namespace {

class PolluxWorkload final : public WorkloadSource {
 public:
  explicit PolluxWorkload(std::string path) : path_(std::move(path)) {}

  Trace read(std::uint64_t) const override {
    CsvTable table(path_, {"name", "time", "application", "num_replicas", "batch_size"}, {});
    Trace trace;
    while (table.next()) {
      TraceJob job;
      JobSpec& spec = job.spec;
      spec.name = table.required_text("name");
      spec.arrival = table.number("time", 0);
      spec.model = table.required_text("application");
      spec.gpus = spec.min_gpus = spec.max_gpus = static_cast<int>(table.integer("num_replicas", 1, 1 << 20));
      spec.batch_size = static_cast<int>(table.integer("batch_size", 1, std::numeric_limits<int>::max()));
      trace.jobs.push_back(std::move(job));
    }
    return trace;
  }

 private:
  std::string path_;
};

}  // namespace

std::unique_ptr<WorkloadSource> parse_pollux_workload(TableReader& reader) {
  return std::make_unique<PolluxWorkload>(reader.input_path("path", std::nullopt).value_or(""));
}

}  // namespace tessel
