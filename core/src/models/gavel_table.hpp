// `gavel-table`: throughputs measured by Gavel (OSDI'20), in steps/s, looked
// up by GPU type, job type and GPU count. Declared here, not in an anonymous
// namespace, so that engine code and tests can reach the space-sharing data
// that the ThroughputModel interface has no place for. See gavel_table.cpp
// for the rule and its simplifications.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tessel/throughput.hpp"

namespace tessel {

class GavelTableModel final : public ThroughputModel {
 public:
  // Reads Gavel's `simulation_throughputs.json`. `use_unconsolidated` prices
  // jobs spread over several nodes with the `<type>_unconsolidated` tables.
  // Throws UserError naming the file when it cannot be read or is malformed.
  GavelTableModel(const std::string& path, bool use_unconsolidated);

  std::string_view name() const override { return "gavel-table"; }
  double rate(const JobSpec& job, const Shape& shape) const override;
  // Gavel's job types, such as "ResNet-50 (batch size 64)", sorted.
  std::span<const std::string> profiles() const override { return job_types_; }
  std::string check(const ClusterState& cluster) const override;
  // A job type measured on one GPU only (A3C, CycleGAN, Recommendation)
  // suits single-GPU jobs only; Gavel calls the others distributed.
  bool profile_suits(std::string_view profile, int gpus) const override;
  // Gavel measured pairs: two jobs of equal GPU counts on the same GPUs.
  int max_colocated() const override { return 2; }
  // The job's own steps/s of the measured pair (0 where Gavel measured 0:
  // the pair does not fit); UserError naming the file when it lacks the pair.
  double rate_colocated(const JobSpec& job, std::span<const JobSpec* const> others,
                        const Shape& shape) const override;

  // Steps/s of `job` and of `partner` while both run on the same
  // `shape.gpus` GPUs of `shape.gpu_type` (Gavel's space sharing), exactly
  // as measured; nullopt when the pair was not measured or cannot share
  // (Gavel records 0 for both).
  std::optional<std::pair<double, double>> colocated_rates(const JobSpec& job, const JobSpec& partner,
                                                           const Shape& shape) const;

 private:
  struct Measurement {
    int gpus = 0;
    double steps_per_second = 0;
  };
  // Positive measurements of one job type on one GPU type, by ascending GPU count.
  using ScalingCurve = std::vector<Measurement>;

  std::optional<std::size_t> gpu_type_index(std::string_view gpu_type) const;
  std::optional<std::size_t> job_type_index(const std::string& job_type) const;
  std::size_t curve_index(std::size_t gpu_type, bool spread, std::size_t job_type) const;
  const ScalingCurve& curve(std::size_t gpu_type, bool spread, std::size_t job_type) const;

  std::string path_;
  std::vector<std::string> gpu_types_;  // lower case
  std::vector<std::string> job_types_;
  std::unordered_map<std::string, std::size_t> job_type_indices_;
  std::vector<bool> distributed_;  // by job type: measured on more than one GPU, on some GPU type
  // By curve_index; a spread curve is the consolidated one with the
  // unconsolidated measurements substituted.
  std::vector<ScalingCurve> curves_;
  // (gpu type, job type, GPUs, partner job type) -> [job's, partner's] steps/s, 0 where they cannot share.
  std::map<std::tuple<std::size_t, std::size_t, int, std::size_t>, std::pair<double, double>> colocated_;
};

}  // namespace tessel
