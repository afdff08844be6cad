// `synergy-sensitivity`: Synergy's CPU and memory sensitivity profiles as a
// throughput model.
//   model = { name = "synergy-sensitivity", path = "model_sensitivity.csv" }
//
// Source: msr-fiddle/synergy, simulator/:
//   models/<model>_<gpus>.py   ModelStats: the tput matrix over CPUs {1, 2, 3,
//                              4, 5, 6, 9, 12, 24} x memory {20.83, 62.5, 125,
//                              187.5, 250} GB per GPU (the grid of
//                              jobs/job.py, Job.cpu_val and mem_val), and the
//                              best point (cpus, mem) with its speedup
//   jobs/model.py              Model.use_scores_from_tput: every GPU count
//                              uses the model's 1-GPU profile
//   jobs/workload.py           add_synergy_profile: demand = GPUs x the
//                              per-GPU best; a trace duration becomes
//                              iterations at the fair-share iteration time
//   jobs/job.py                Job.allocate: fair-share iteration time,
//                              divided by the speedup when the job holds its
//                              best demand
//   opt_algo/synergy_opt.py    allocate_round: iteration time divided by
//                              tput[CPUs per GPU, memory per GPU]
//   resources/cluster.py       _make_fair_share: the fair share is a server's
//                              CPUs and memory divided by its GPUs
//
// The rules:
// - A profile's throughput is relative to the GPU-proportional ("fair")
//   share, where it is 1: 3 CPUs and 62.5 GB per GPU on Synergy's 8-GPU
//   servers with 24 CPUs and 500 GB. A trace duration is the job's run time
//   at that share.
// - So work is GPU-seconds at the proportional share, and rate = GPUs x GPU
//   share x relative throughput at the job's CPUs and memory per GPU
//   (shape.cpus / shape.gpus, shape.mem_gb / shape.gpus).
// - Every job uses its model's profile measured on the fewest GPUs (1),
//   scaled per GPU, as Synergy's simulator does. With profiles_by_gpu_count,
//   the profile measured on the job's GPU count (else the largest fewer).
//
// Choices where Synergy has none:
// - Between grid points, relative throughput is bilinear in CPUs and memory
//   per GPU. Synergy reads the matrix only at grid points, where its
//   allocations lie, and rescales a speedup linearly in CPUs when it caps a
//   demand to a server (add_synergy_profile). Beyond the grid: the nearest
//   edge.
// - A point not profiled (0, or absent like the 250 GB column of the
//   multi-GPU profiles) runs as fast as the better of its two filled
//   neighbours with one CPU level or one memory level less: more CPUs or
//   memory never slow a job down. A point with no profiled point at or
//   below it is an error.
// - A shape with no CPUs (memory) stands for no demand declared and gets the
//   proportional share, share_cpus_per_gpu and share_mem_gb_per_gpu (by
//   default Synergy's; set them to the cluster's own per-GPU share).
// - The workload prices a duration at the job's declared CPUs and memory,
//   so in a trace that declares them a duration is taken at that demand,
//   not at the proportional share; Synergy-style traces leave them empty.
// - speedup = "best_or_share" follows Synergy's Job.allocate instead of
//   interpolating: the profile's speedup at (at least) the best demand,
//   capped to a server of server_gpus GPUs and rescaled as
//   add_synergy_profile does, and elsewhere the profile but at most 1.
// - Not modelled: the placement penalty (1 in every Synergy profile),
//   storage bandwidth, GPU types. A fractional GPU share slows in proportion.
#include "models/synergy_sensitivity.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

#include "models/interpolation.hpp"
#include "models/models.hpp"
#include "common/csv_table.hpp"
#include "engine/errors.hpp"

namespace tessel {

namespace {

struct ProfilePoint {
  std::size_t line = 0;
  double cpus = 0;
  double mem_gb = 0;
  double relative = 0;  // 0: not profiled
};

std::string profile_name(const std::string& model, int gpus) {
  return model + " on " + std::to_string(gpus) + (gpus == 1 ? " GPU" : " GPUs");
}

std::string number_text(double x) {
  std::string text = std::to_string(x);
  text.erase(text.find_last_not_of('0') + 1);
  if (text.back() == '.') text.pop_back();
  return text;
}

std::size_t level_of(const std::vector<double>& levels, double value) {
  return static_cast<std::size_t>(std::lower_bound(levels.begin(), levels.end(), value) - levels.begin());
}

// Gives each point not profiled (0) of a CPU-major grid the better of its
// filled neighbours with one CPU level or one memory level less. Returns
// the first point that has neither.
std::optional<std::size_t> fill_unprofiled(std::vector<double>& relative, std::size_t mem_levels) {
  for (std::size_t cell = 0; cell < relative.size(); ++cell) {
    if (relative[cell] > 0) continue;
    if (cell >= mem_levels) relative[cell] = std::max(relative[cell], relative[cell - mem_levels]);
    if (cell % mem_levels > 0) relative[cell] = std::max(relative[cell], relative[cell - 1]);
    if (relative[cell] <= 0) return cell;
  }
  return std::nullopt;
}

}  // namespace

SynergySensitivityModel::SynergySensitivityModel(const std::filesystem::path& csv, Options options)
    : options_(options) {
  std::map<std::pair<std::string, int>, Profile> profiles;  // by (model, GPUs)
  std::map<std::pair<std::string, int>, std::vector<ProfilePoint>> points;
  std::set<double> cpu_levels, mem_gb_levels;

  CsvTable table(csv.string(),
                 {"model", "gpus", "best_cpus", "best_mem_gb", "speedup_at_best", "cpus", "mem_gb",
                  "relative_throughput"},
                 {"batch", "iter_time_s"});
  while (table.next()) {
    const std::string model(table.text("model"));
    if (model.empty()) table.fail("model", "expected a model name");
    const auto gpus = static_cast<int>(table.integer("gpus", 1, 1 << 20));
    Profile best;
    best.gpus = gpus;
    best.best_cpus_per_gpu = table.number("best_cpus", 0);
    best.best_mem_gb_per_gpu = table.number("best_mem_gb", 0);
    best.speedup_at_best = table.number("speedup_at_best", 0);
    if (table.has("iter_time_s")) best.iteration_seconds = table.number("iter_time_s", 0);
    const auto [known, first] = profiles.emplace(std::pair(model, gpus), best);
    if (!first && (known->second.best_cpus_per_gpu != best.best_cpus_per_gpu ||
                   known->second.best_mem_gb_per_gpu != best.best_mem_gb_per_gpu ||
                   known->second.speedup_at_best != best.speedup_at_best ||
                   known->second.iteration_seconds != best.iteration_seconds))
      table.fail("best_cpus", "best_cpus, best_mem_gb, speedup_at_best and iter_time_s differ from earlier rows of " +
                                  profile_name(model, gpus));
    ProfilePoint point;
    point.line = table.line();
    point.cpus = table.number("cpus", 0);
    point.mem_gb = table.number("mem_gb", 0);
    if (point.cpus <= 0) table.fail("cpus", "expected a positive number of CPUs per GPU");
    if (point.mem_gb <= 0) table.fail("mem_gb", "expected a positive number of GB per GPU");
    point.relative = table.number("relative_throughput", 0);
    cpu_levels.insert(point.cpus);
    mem_gb_levels.insert(point.mem_gb);
    points[{model, gpus}].push_back(point);
  }
  if (profiles.empty()) throw TraceError(table.path(), 0, "", "no profiles");
  cpu_levels_.assign(cpu_levels.begin(), cpu_levels.end());
  mem_gb_levels_.assign(mem_gb_levels.begin(), mem_gb_levels.end());

  const std::size_t mems = mem_gb_levels_.size();
  for (auto& [key, profile] : profiles) {
    const auto& [model, gpus] = key;
    profile.relative.assign(cpu_levels_.size() * mems, 0.0);
    std::vector<bool> seen(profile.relative.size(), false);
    for (const ProfilePoint& point : points[key]) {
      const std::size_t cell = level_of(cpu_levels_, point.cpus) * mems + level_of(mem_gb_levels_, point.mem_gb);
      if (seen[cell])
        throw TraceError(table.path(), point.line, "",
                         "repeats the point cpus = " + number_text(point.cpus) + ", mem_gb = " +
                             number_text(point.mem_gb) + " of " + profile_name(model, gpus));
      seen[cell] = true;
      profile.relative[cell] = point.relative;
    }
    if (const std::optional<std::size_t> cell = fill_unprofiled(profile.relative, mems))
      throw TraceError(table.path(), 0, "",
                       profile_name(model, gpus) + " has no profiled point at or below cpus = " +
                           number_text(cpu_levels_[*cell / mems]) + ", mem_gb = " +
                           number_text(mem_gb_levels_[*cell % mems]));
    if (models_.empty() || models_.back().name != model) {
      models_.push_back({model, {}});
      names_.push_back(model);
    }
    models_.back().by_gpus.push_back(std::move(profile));  // the map orders by model, then GPUs
  }
}

const SynergySensitivityModel::Profile& SynergySensitivityModel::profile(std::string_view model, int gpus) const {
  const auto it = std::lower_bound(names_.begin(), names_.end(), model);
  if (it == names_.end() || *it != model)
    throw std::invalid_argument("synergy-sensitivity has no profile of model '" + std::string(model) + "'");
  const std::vector<Profile>& by_gpus = models_[static_cast<std::size_t>(it - names_.begin())].by_gpus;
  if (!options_.profiles_by_gpu_count) return by_gpus.front();
  const auto above = std::upper_bound(by_gpus.begin(), by_gpus.end(), gpus,
                                      [](int count, const Profile& p) { return count < p.gpus; });
  return above == by_gpus.begin() ? by_gpus.front() : *std::prev(above);
}

double SynergySensitivityModel::relative_throughput(std::string_view model, int gpus, double cpus,
                                                    double mem_gb) const {
  const Profile& measured = profile(model, gpus);
  gpus = std::max(gpus, 1);
  const double cpus_per_gpu = cpus > 0 ? cpus / gpus : options_.share_cpus_per_gpu;
  const double mem_gb_per_gpu = mem_gb > 0 ? mem_gb / gpus : options_.share_mem_gb_per_gpu;
  const GridPosition c = locate(cpu_levels_, cpus_per_gpu);
  const GridPosition m = locate(mem_gb_levels_, mem_gb_per_gpu);
  const std::size_t mems = mem_gb_levels_.size();
  auto at = [&](std::size_t cpu, std::size_t mem) { return measured.relative[cpu * mems + mem]; };
  return lerp(lerp(at(c.lower, m.lower), at(c.lower, m.upper), m.weight),
              lerp(at(c.upper, m.lower), at(c.upper, m.upper), m.weight), c.weight);
}

SynergyDemand SynergySensitivityModel::best_demand(std::string_view model, int gpus) const {
  const Profile& measured = profile(model, gpus);
  return {measured.best_cpus_per_gpu * gpus, measured.best_mem_gb_per_gpu * gpus, measured.speedup_at_best};
}

SynergyDemand SynergySensitivityModel::capped_demand(std::string_view model, int gpus) const {
  SynergyDemand demand = best_demand(model, gpus);
  const int server_gpus = options_.server_gpus;
  if (server_gpus <= 0) return demand;
  const double server_cpus = server_gpus * options_.share_cpus_per_gpu;
  const double server_mem_gb = server_gpus * options_.share_mem_gb_per_gpu;
  const double ideal_cpus = demand.cpus;
  bool rescale = false;
  // add_synergy_profile: a demand above a server's is cut to the server's;
  // a job wider than a server gets the share and no speedup. (Its storage
  // demand, the share per GPU whatever the model, exceeds a server exactly
  // when the job is wider than one, so such a job never keeps a speedup.)
  if (demand.cpus > server_cpus) demand.cpus = server_cpus, rescale = true;
  if (demand.mem_gb > server_mem_gb) demand.mem_gb = server_mem_gb, rescale = true;
  if (gpus > server_gpus) {
    if (ideal_cpus > server_cpus) demand.cpus = gpus * options_.share_cpus_per_gpu;
    if (best_demand(model, gpus).mem_gb > server_mem_gb) demand.mem_gb = gpus * options_.share_mem_gb_per_gpu;
    demand.speedup = 1;
    return demand;
  }
  if (rescale) {
    // Linear in CPUs between the share (speedup 1) and the ideal demand,
    // read at the capped CPUs; Synergy rescales by CPUs even when only the
    // memory was capped (it then leaves the speedup as it was).
    const double share_cpus = gpus * options_.share_cpus_per_gpu;
    if (ideal_cpus != share_cpus)
      demand.speedup = 1 + (demand.speedup - 1) / (ideal_cpus - share_cpus) * (demand.cpus - share_cpus);
  }
  return demand;
}

double SynergySensitivityModel::iteration_work(const JobSpec& job, int gpus) const {
  // Synergy's job iterates at its model's iteration time at the share
  // whatever its GPU count (add_synergy_profile, Model.use_scores_from_tput).
  return std::max(gpus, 1) * profile(job.model, gpus).iteration_seconds;
}

double SynergySensitivityModel::rate(const JobSpec& job, const Shape& shape) const {
  if (shape.gpus < 1) return 0;
  double relative = relative_throughput(job.model, shape.gpus, shape.cpus, shape.mem_gb);
  if (options_.best_or_share) {
    // Job.allocate: the iteration time is divided by the speedup when the
    // job holds its best demand, else it is the share's.
    const SynergyDemand best = capped_demand(job.model, shape.gpus);
    const double cpus = shape.cpus > 0 ? shape.cpus : shape.gpus * options_.share_cpus_per_gpu;
    const double mem_gb = shape.mem_gb > 0 ? shape.mem_gb : shape.gpus * options_.share_mem_gb_per_gpu;
    const bool holds_best = cpus >= best.cpus * (1 - 1e-9) && mem_gb >= best.mem_gb * (1 - 1e-9);
    relative = holds_best ? best.speedup : std::min(relative, 1.0);
  }
  return shape.gpus * (shape.gpu_milli / 1000.0) * relative;
}

std::unique_ptr<ThroughputModel> parse_synergy_sensitivity_model(TableReader& arguments, const ModelSettings&) {
  const std::optional<std::string> path = arguments.input_path("path", std::nullopt);
  SynergySensitivityModel::Options options;
  options.share_cpus_per_gpu =
      arguments.number("share_cpus_per_gpu", options.share_cpus_per_gpu, 1e-3).value_or(options.share_cpus_per_gpu);
  options.share_mem_gb_per_gpu = arguments.number("share_mem_gb_per_gpu", options.share_mem_gb_per_gpu, 1e-3)
                                     .value_or(options.share_mem_gb_per_gpu);
  options.profiles_by_gpu_count = arguments.boolean("profiles_by_gpu_count", false).value_or(false);
  options.best_or_share =
      arguments.choice("speedup", {"interpolated", "best_or_share"}, "interpolated") == "best_or_share";
  options.server_gpus = static_cast<int>(arguments.integer("server_gpus", 0, 0, 1 << 20).value_or(0));
  if (options.server_gpus > 0 && !options.best_or_share)
    arguments.error("server_gpus", "synergy-sensitivity: 'server_gpus' caps the best demand of speedup = "
                                   "\"best_or_share\"; with \"interpolated\" the rate follows what a job holds");
  if (!path) return nullptr;
  try {
    return std::make_unique<SynergySensitivityModel>(*path, options);
  } catch (const UserError& e) {
    arguments.error("path", "synergy-sensitivity: " + std::string(e.what()));
    return nullptr;
  }
}

}  // namespace tessel
