// `kind = "openb"`: the pod list of Alibaba's 2023 GPU cluster trace, as
// hkust-adsl/kubernetes-scheduler-simulator ships it (data/csv/
// openb_pod_list_*.csv, described in data/README.md), one pod per row, with
// a header:
//
//   name            "openb-pod-0017"                      -> name
//   cpu_milli       CPU request, in thousandths            -> cpus = cpu_milli / 1000
//   memory_mib      memory request, in MiB                 -> mem_gb = memory_mib / 1024
//   num_gpu         GPUs, 0..8                             -> gpus (= min_gpus = max_gpus)
//   gpu_milli       share of the GPU, for single-GPU pods  -> gpu_milli
//   gpu_spec        allowed GPU types, "V100M16|V100M32"   -> not used (see below)
//   qos             LS, BE, Burstable, Guaranteed          -> not used
//   pod_phase       Running, Succeeded, Failed, Pending    -> not used
//   creation_time   seconds                                -> arrival
//   deletion_time   seconds                                -> end of the run
//   scheduled_time  seconds; empty if never scheduled      -> start of the run
//
// Two readings, by the key `times`:
// - "replay" (default): the pods at their trace times, as below.
// - "ignore": the reading of the ATC'23 experiments. data/pod_csv_to_yaml.py
//   leaves the times out of the pods it writes, so each row is a request
//   that arrives and never leaves: every pod arrives at time 0, in file
//   order, with an infinite duration (it holds what it gets until the run
//   ends), and pods that never ran are kept, as the experiments keep every
//   row. Ordering and resampling are left to the [workload] transforms
//   (`shuffle`, `gpu_demand_ratio`); the times need not even be valid.
//
// Choices, from how the simulator uses these files:
// - Its event replay (pkg/simulator/simulator.go) creates each pod at its
//   creation time and deletes it at its deletion time, placing it at once.
//   tessel's scheduler decides when a pod starts, so arrival is the creation
//   time and the duration is what the pod ran in the cluster: deletion_time
//   - scheduled_time. The time between creation and scheduling was the
//   production scheduler's queueing, which the simulation must reproduce,
//   not replay. (The ATC'23 experiments drop the times altogether:
//   data/pod_csv_to_yaml.py leaves them out, so pods only arrive until the
//   cluster is full.)
// - Pods with no scheduled_time never ran (pod_phase Pending; deleted while
//   waiting) and pods deleted the moment they were scheduled have no run
//   time to price: both are skipped, with a note counting them.
// - CPU-only pods (num_gpu = 0): skipped, with a note counting them, unless
//   `cpu_only = "keep"`: then each is a job of one GPU at a share of 0 milli.
//   It holds CPUs and memory on a node and none of its GPU's time; the GPU
//   only ties it to the node, as the pod is bound to one. They matter where
//   CPUs run short: in the ATC'23 runs they take about a fifth of the
//   cluster's CPUs. (Under the linear model such a job does one unit of work
//   a second.)
// - gpu_milli is a share of one GPU and, as data/README.md says, applies to
//   single-GPU pods: it must be 1..1000 there, and 1000 (whole GPUs) on
//   pods of more GPUs, as in every file the simulator ships.
// - gpu_spec constrains the GPU type, which a tessel job cannot express yet:
//   the constraint is dropped, with a note counting the pods that had one.
// - Times must not run backwards: scheduled_time >= creation_time and
//   deletion_time >= scheduled_time (or creation_time, if never scheduled).
#include <limits>

#include "common/csv_table.hpp"
#include "workloads/kinds.hpp"

namespace tessel {

namespace {

class OpenbWorkload final : public WorkloadSource {
 public:
  OpenbWorkload(std::string path, bool replay_times, bool keep_cpu_only)
      : path_(std::move(path)), replay_times_(replay_times), keep_cpu_only_(keep_cpu_only) {}

  Trace read(std::uint64_t) const override {
    CsvTable table(path_,
                   {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
                    "creation_time", "deletion_time", "scheduled_time"},
                   {});
    Trace trace;
    std::size_t cpu_only = 0, never_ran = 0, cpu_only_never_ran = 0, gpu_type_constrained = 0;
    while (table.next()) {
      TraceJob job;
      JobSpec& spec = job.spec;
      spec.name = table.required_text("name");
      spec.cpus = static_cast<double>(table.integer("cpu_milli", 0)) / 1000;
      spec.mem_gb = static_cast<double>(table.integer("memory_mib", 0)) / 1024;
      spec.gpus = spec.min_gpus = spec.max_gpus = static_cast<int>(table.integer("num_gpu", 0, 1 << 20));
      spec.gpu_milli = gpu_share(table, spec.gpus);
      std::optional<double> ran = std::numeric_limits<double>::infinity();
      if (replay_times_) {
        spec.arrival = table.number("creation_time", 0);
        ran = run_time(table, spec.arrival);
      }
      const bool cpu_only_pod = spec.gpus == 0;
      if (cpu_only_pod && !keep_cpu_only_) {
        ++cpu_only;
        continue;
      }
      if (!ran) {
        ++(cpu_only_pod ? cpu_only_never_ran : never_ran);
        continue;
      }
      if (cpu_only_pod) {
        spec.gpus = spec.min_gpus = spec.max_gpus = 1;
        spec.gpu_milli = 0;
      }
      job.duration = *ran;
      if (!table.text("gpu_spec").empty()) ++gpu_type_constrained;
      trace.jobs.push_back(std::move(job));
    }
    if (cpu_only > 0) trace.notes.push_back("skipped " + count_text(cpu_only) + " CPU-only pods");
    if (never_ran > 0) trace.notes.push_back("skipped " + count_text(never_ran) + " GPU pods that never ran");
    if (cpu_only_never_ran > 0)
      trace.notes.push_back("skipped " + count_text(cpu_only_never_ran) + " CPU-only pods that never ran");
    if (gpu_type_constrained > 0)
      trace.notes.push_back("ignored the GPU-type constraint (gpu_spec) of " + count_text(gpu_type_constrained) +
                            " pods");
    return trace;
  }

 private:
  // Seconds from scheduling to deletion; nullopt for a pod that never ran.
  // The times must not run backwards.
  static std::optional<double> run_time(const CsvTable& table, double created) {
    const std::optional<double> scheduled = table.optional_number("scheduled_time", created);
    const double deleted = table.number("deletion_time", scheduled.value_or(created));
    if (!scheduled || deleted == *scheduled) return std::nullopt;
    return deleted - *scheduled;
  }

  // The share of each GPU the pod holds: its own on a single GPU, whole GPUs
  // otherwise. CPU-only pods get theirs where they are read (any value in range here).
  static int gpu_share(const CsvTable& table, int gpus) {
    if (gpus == 1) return static_cast<int>(table.integer("gpu_milli", 1, 1000));
    const auto milli = table.integer("gpu_milli", 0, 1000);
    if (gpus > 1 && milli != 1000)
      table.fail("gpu_milli", "expected 1000 on a pod of " + std::to_string(gpus) +
                                  " GPUs (shares apply to single-GPU pods), got '" +
                                  std::string(table.text("gpu_milli")) + "'");
    return 1000;
  }

  std::string path_;
  bool replay_times_;
  bool keep_cpu_only_;
};

}  // namespace

std::unique_ptr<WorkloadSource> parse_openb_workload(TableReader& reader) {
  std::string path = reader.input_path("path", std::nullopt).value_or("");
  const bool replay_times = reader.choice("times", {"replay", "ignore"}, "replay").value_or("replay") == "replay";
  const bool keep_cpu_only = reader.choice("cpu_only", {"skip", "keep"}, "skip").value_or("skip") == "keep";
  return std::make_unique<OpenbWorkload>(std::move(path), replay_times, keep_cpu_only);
}

}  // namespace tessel
