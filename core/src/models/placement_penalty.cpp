// `placement-penalty`: a base model, slowed down when a job's GPUs span
// several nodes or racks.
//
//   [workload.model]
//   name = "placement-penalty"
//   across_nodes = 0.8
//   across_racks = 0.6
//   models = { vgg19 = { across_nodes = 0.5 } }
//   base = { name = "gavel-table", path = "...", unconsolidated = false }
//
// The rule: rate = base rate x factor, where the factor is 1 on one node,
// `across_nodes` on several nodes of one rack, and the smaller of
// `across_nodes` and `across_racks` across racks (spanning racks also spans
// nodes, so it is never faster). An entry of `models`, keyed by the job's
// profile (JobSpec::model), replaces these factors for that profile; what it
// leaves out comes from the built-in entry for that profile if there is one,
// else from the top level. `base` defaults to "linear"; progress-dependent
// rates (rate_at and its change points), batch-size ranges, profiles,
// default work, the cluster check and space sharing are the base's
// (a shared job spread over nodes pays the same factor).
//
// Sources for the defaults:
// - Which models suffer. Tiresias (Gu et al., NSDI'19, §2.2 on
//   over-aggressive consolidation and §3.3 on its profiler and placement)
//   relaxes consolidation except for models whose parameters are dominated by
//   a few large tensors. Its simulator's tensor sizes
//   (SymbioticLab/Tiresias, simulator/models.py) show which: VGG11/16/19
//   carry a 392 MB tensor and AlexNet a 144 MB one, while no ResNet or
//   Inception tensor exceeds 9 MB. That simulator itself models no placement
//   slowdown (simulator/README.md).
// - How much. Blox (msr-fiddle/blox) multiplies a job's speed by a
//   per-model penalty when its GPUs are on more than one machine
//   (jobs/job.py divides the iteration time by it). Its approximate scores
//   (jobs/model.py, use_approx_scores) give 0.9 to ResNet-50 and to models
//   it does not list, 0.6 to AlexNet, its strongest; its profiled scores
//   (use_real_scores) give 1 throughout. So `across_nodes` defaults to 0.9,
//   and the built-in entries give Tiresias's sensitive models, under the
//   names its traces use, 0.6: `alexnet` as in Blox, and `vgg11`, `vgg16`,
//   `vgg19`, which Blox does not list, alike, their largest tensor being
//   larger still.
// - Racks. None of these sources measures a further slowdown across racks
//   (Blox only counts machines; the Philly study, Jeon et al., ATC'19,
//   relates locality to GPU utilization by the number of servers a job
//   spans), so `across_racks` defaults to 1: no penalty beyond
//   `across_nodes`.
//
// Simplifications: one factor however many nodes or racks a job spans and
// however unevenly its GPUs are split; no contention between jobs for the
// network. A `gavel-table` base already prices spread jobs with Gavel's
// unconsolidated measurements; give it `unconsolidated = false` so that the
// slowdown is counted once.
#include <algorithm>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>

#include "models/models.hpp"

namespace tessel {

namespace {

struct SpreadFactors {
  double across_nodes = 1;
  double across_racks = 1;
};

constexpr double kDefaultAcrossNodes = 0.9;
constexpr double kDefaultAcrossRacks = 1;
constexpr std::pair<std::string_view, double> kConsolidationSensitive[] = {
    {"alexnet", 0.6}, {"vgg11", 0.6}, {"vgg16", 0.6}, {"vgg19", 0.6}};

class PlacementPenaltyModel final : public ThroughputModel {
 public:
  PlacementPenaltyModel(std::shared_ptr<const ThroughputModel> base, SpreadFactors defaults,
                        std::unordered_map<std::string, SpreadFactors> per_profile)
      : base_(std::move(base)), defaults_(defaults), per_profile_(std::move(per_profile)) {}

  std::string_view name() const override { return "placement-penalty"; }

  double rate(const JobSpec& job, const Shape& shape) const override {
    return base_->rate(job, shape) * factor(job, shape);
  }
  double rate_at(const JobSpec& job, const Shape& shape, double progress) const override {
    return base_->rate_at(job, shape, progress) * factor(job, shape);
  }
  bool rate_depends_on_progress() const override { return base_->rate_depends_on_progress(); }
  double next_rate_change(const JobSpec& job, double progress) const override {
    return base_->next_rate_change(job, progress);
  }
  std::optional<BatchSizeRange> batch_sizes(const JobSpec& job, int gpus) const override {
    return base_->batch_sizes(job, gpus);
  }

  std::span<const std::string> profiles() const override { return base_->profiles(); }
  bool profile_suits(std::string_view profile, int gpus) const override {
    return base_->profile_suits(profile, gpus);
  }
  double default_work(const JobSpec& job) const override { return base_->default_work(job); }
  int max_colocated() const override { return base_->max_colocated(); }
  double rate_colocated(const JobSpec& job, std::span<const JobSpec* const> others,
                        const Shape& shape) const override {
    return base_->rate_colocated(job, others, shape) * factor(job, shape);
  }
  std::string check(const ClusterState& cluster) const override {
    const std::string problem = base_->check(cluster);
    return problem.empty() ? problem : "base model '" + std::string(base_->name()) + "': " + problem;
  }

 private:
  double factor(const JobSpec& job, const Shape& shape) const {
    if (shape.nodes <= 1) return 1;
    const auto found = per_profile_.find(job.model);
    const SpreadFactors& factors = found == per_profile_.end() ? defaults_ : found->second;
    return shape.racks > 1 ? std::min(factors.across_nodes, factors.across_racks) : factors.across_nodes;
  }

  std::shared_ptr<const ThroughputModel> base_;
  SpreadFactors defaults_;
  std::unordered_map<std::string, SpreadFactors> per_profile_;
};

// A factor in (0, 1]: a spread job is never faster than a consolidated one.
std::optional<double> read_factor(TableReader& reader, std::string_view key, double fallback) {
  auto factor = reader.number(key, fallback);
  if (factor && !(*factor > 0 && *factor <= 1)) {
    std::ostringstream message;
    message << "'" << key << "' in [" << reader.table_name() << "] must be in (0, 1], got " << *factor;
    reader.error(key, message.str());
    return std::nullopt;
  }
  return factor;
}

SpreadFactors read_factors(TableReader& reader, SpreadFactors inherited) {
  SpreadFactors factors;
  factors.across_nodes = read_factor(reader, "across_nodes", inherited.across_nodes).value_or(inherited.across_nodes);
  factors.across_racks = read_factor(reader, "across_racks", inherited.across_racks).value_or(inherited.across_racks);
  return factors;
}

}  // namespace

std::unique_ptr<ThroughputModel> parse_placement_penalty_model(TableReader& arguments, const ModelSettings& model) {
  std::shared_ptr<const ThroughputModel> base = build_throughput_model(
      read_model_settings(arguments, model.arguments.document, "base"), arguments.diagnostics());
  const SpreadFactors defaults = read_factors(arguments, {kDefaultAcrossNodes, kDefaultAcrossRacks});

  std::unordered_map<std::string, SpreadFactors> per_profile;
  for (const auto& [profile, across_nodes] : kConsolidationSensitive)
    per_profile[std::string(profile)] = {across_nodes, defaults.across_racks};

  if (const toml::table* models = arguments.table("models")) {
    TableReader models_reader = arguments.nested(models, arguments.table_name() + ".models");
    const std::span<const std::string> profiles = base ? base->profiles() : std::span<const std::string>();
    for (auto&& [key, value] : *models) {
      const std::string profile(key.str());
      const toml::table* entry = models_reader.table(profile);
      if (entry == nullptr) continue;  // not a table: reported
      // A typo in a profile name would otherwise silently leave the job unpenalized.
      if (!profiles.empty() && std::find(profiles.begin(), profiles.end(), profile) == profiles.end()) {
        std::string valid;
        for (const std::string& p : profiles) valid += (valid.empty() ? "" : ", ") + p;
        models_reader.error(profile, "base model '" + std::string(base->name()) + "' has no profile '" + profile +
                                         "' (valid: " + valid + ")");
        continue;
      }
      TableReader entry_reader = models_reader.nested(entry, models_reader.table_name() + "." + profile);
      const auto built_in = per_profile.find(profile);
      const SpreadFactors inherited = built_in != per_profile.end() ? built_in->second : defaults;
      per_profile[profile] = read_factors(entry_reader, inherited);
      entry_reader.finish();
    }
  }
  if (!base) return nullptr;
  return std::make_unique<PlacementPenaltyModel>(std::move(base), defaults, std::move(per_profile));
}

}  // namespace tessel
