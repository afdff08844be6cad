// `synergy-sensitivity`: Synergy's (OSDI'22) CPU and memory sensitivity
// profiles as a throughput model, plus the queries a Synergy policy needs:
// each model's best demand and its throughput at any CPUs and memory.
// synergy_sensitivity.cpp states the source, the rules and every
// simplification.
//
// Units. Work is GPU-seconds at the GPU-proportional share of CPUs and
// memory, the share the profiles are normalised to and Synergy's trace
// durations were measured at: a job given that share takes its duration.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessel/throughput.hpp"

namespace tessel {

// What a whole job asks for to run at its best, and how fast it then runs
// relative to the proportional share.
struct SynergyDemand {
  double cpus = 0;
  double mem_gb = 0;
  double speedup = 1;
};

class SynergySensitivityModel final : public ThroughputModel {
 public:
  struct Options {
    // The GPU-proportional share, given to jobs that declare no CPUs
    // (memory): Synergy's 8-GPU servers with 24 CPUs and 500 GB.
    double share_cpus_per_gpu = 3;
    double share_mem_gb_per_gpu = 62.5;
    // Price each job with the profile measured on its GPU count (else the
    // largest fewer) instead of the 1-GPU profile, as Synergy's simulator does.
    bool profiles_by_gpu_count = false;
    // speedup = "best_or_share" (Synergy's Job.allocate): a job holding at
    // least its best demand runs at the profile's speedup, any other at the
    // profile's throughput but never above the share's (1). "interpolated"
    // (default): the profile's throughput at what it holds.
    bool best_or_share = false;
    // server_gpus > 0 (with best_or_share): the best demand is capped to one
    // server of this many GPUs with the share's CPUs and memory per GPU, and
    // the speedup rescaled as add_synergy_profile does; 0: no cap.
    int server_gpus = 0;
  };

  // Reads model_sensitivity.csv. Throws TraceError naming the file and line.
  SynergySensitivityModel(const std::filesystem::path& csv, Options options);

  std::string_view name() const override { return "synergy-sensitivity"; }
  double rate(const JobSpec& job, const Shape& shape) const override;
  std::span<const std::string> profiles() const override { return names_; }
  // GPUs x the profile's iteration time at the proportional share (its
  // `iter_time_s` column; 0 when the file has none): work is GPU-seconds at
  // that share.
  double iteration_work(const JobSpec& job, int gpus) const override;

  // Throughput of `model` on `gpus` GPUs holding `cpus` and `mem_gb` in all
  // (0: the proportional share), relative to the proportional share.
  double relative_throughput(std::string_view model, int gpus, double cpus, double mem_gb) const;
  // The CPUs and memory, for the whole job, at which `model` on `gpus` GPUs
  // runs fastest, as profiled: not capped to what a node holds.
  SynergyDemand best_demand(std::string_view model, int gpus) const;
  // The same capped to one server of Options::server_gpus GPUs, with the
  // speedup rescaled (jobs/workload.py add_synergy_profile); uncapped when
  // server_gpus is 0.
  SynergyDemand capped_demand(std::string_view model, int gpus) const;

 private:
  // One model measured on one GPU count.
  struct Profile {
    int gpus = 0;
    double best_cpus_per_gpu = 0;
    double best_mem_gb_per_gpu = 0;
    double speedup_at_best = 1;
    double iteration_seconds = 0;  // at the proportional share; 0: not given
    std::vector<double> relative;  // by CPU level, then memory level; every point filled
  };
  struct ModelProfiles {
    std::string name;
    std::vector<Profile> by_gpus;  // ascending GPU counts
  };

  const Profile& profile(std::string_view model, int gpus) const;

  Options options_;
  std::vector<double> cpu_levels_;     // per GPU, ascending
  std::vector<double> mem_gb_levels_;  // per GPU, ascending
  std::vector<ModelProfiles> models_;  // sorted by name
  std::vector<std::string> names_;
};

}  // namespace tessel
