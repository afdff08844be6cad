#include "workloads/workload.hpp"

#include <algorithm>

#include "models/models.hpp"
#include "workloads/kinds.hpp"

namespace tessel {

std::span<const WorkloadKind> workload_kinds() {
  static const WorkloadKind kinds[] = {
      {"synthetic", parse_synthetic_workload, "Gavel-style generator: Poisson arrivals, log-uniform durations"},
      {"csv", parse_csv_workload, "plain CSV trace: arrival,gpus,duration[,name,...]"},
  };
  return kinds;
}

WorkloadConfig read_workload_config(TableReader& reader, const TomlDocument& document) {
  WorkloadConfig config;
  std::vector<std::string> names;
  for (const auto& kind : workload_kinds()) names.emplace_back(kind.name);
  config.kind = reader.choice("kind", names, std::nullopt).value_or("");
  config.seed = static_cast<std::uint64_t>(reader.integer("seed", 1, 0).value_or(1));
  if (reader.present("track")) {
    auto track = reader.numbers("track", std::nullopt, 0, 4e9);
    if (track && (track->size() != 2 || (*track)[0] >= (*track)[1] ||
                  (*track)[0] != static_cast<JobId>((*track)[0]) ||
                  (*track)[1] != static_cast<JobId>((*track)[1])))
      reader.error("track", "'track' in [workload] must be [first, last) job ids with first < last");
    else if (track)
      config.track = {static_cast<JobId>((*track)[0]), static_cast<JobId>((*track)[1])};
  }
  config.model = read_throughput_model(reader, document);
  for (const auto& kind : workload_kinds())
    if (kind.name == config.kind) config.source = kind.parse(reader, document);
  if (!config.source) reader.skip_unknown_keys();
  return config;
}

std::vector<JobSpec> build_jobs(const WorkloadConfig& config, const ClusterState& cluster) {
  std::vector<TraceJob> trace = config.source->read(config.seed);
  std::stable_sort(trace.begin(), trace.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.spec.arrival < b.spec.arrival; });
  std::vector<JobSpec> jobs;
  jobs.reserve(trace.size());
  for (TraceJob& entry : trace) {
    JobSpec& spec = jobs.emplace_back(std::move(entry.spec));
    spec.id = static_cast<JobId>(jobs.size() - 1);
    spec.tracked = !config.track || (spec.id >= config.track->first && spec.id < config.track->second);
    if (spec.total_work <= 0)
      spec.total_work = entry.duration * config.model->rate(spec, cluster.packed_shape(spec, spec.gpus));
  }
  return jobs;
}

}  // namespace tessel
