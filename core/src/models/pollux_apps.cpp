// `pollux-apps`: the applications of Pollux's simulator as a throughput model.
//   model = { name = "pollux-apps", path = "apps" }   # apps/<application>/*.csv
//   placement = "node_count" (default) | "exact": what a shape's step time is
//     (below, "Step time" and the simplifications).
//
// Source: petuum/adaptdl, branch osdi21-artifact: simulator/applications.py
// (Application.get_throughput, get_grad_stats, get_progress,
// get_completion_epoch, and the per-application settings in APPLICATIONS),
// simulator/simulator.py (Job.update_local_bsz, Job.step) and
// simulator/goodput.py (GoodputFunction.throughput, efficiency).
//
// The rules, as Pollux's simulator applies them:
// - Step time. A placement lists the GPUs on each node ("13": 1 and 3 GPUs
//   on two nodes) and is compared in its lexicographically smallest
//   rotation. A placement measured in placements.csv has step and sync
//   times linear in the local batch size between the measured sizes. Any
//   other comes from a table over (nodes, replicas, local batch size):
//   placements.csv averaged over placements of one size, plus
//   scalability.csv; more nodes than measured (16) are priced as 16.
// - Batch size: the shape's layout's (an elasticity policy's choice), else
//   the job's own. Split of a global batch B over R replicas: local =
//   ceil(B / R); accum_steps = ceil(local / max_local_bsz) - 1, at least 1
//   on a single GPU when B exceeds the initial batch size; atomic =
//   ceil(local / (accum_steps + 1)), capped so that the batch stays within
//   the largest validated batch size. Without a batch size, B =
//   max(initial batch size, min_local_bsz x R), Pollux's choice before it
//   has profiled a job. min/max_local_bsz are the extremes of
//   placements.csv, except yolov3's max of 8, a Pollux setting.
//   batch_sizes(R) is the range Pollux's GoodputFunction.optimize searches:
//   [max(initial, min_local_bsz x R), largest validated], empty past
//   Pollux's max_replicas = largest // min_local_bsz.
// - One batch takes step + (step - sync) x accum_steps seconds.
// - Epochs are progress intervals: epoch k ends at the smallest progress any
//   validation curve reached by the end of its epoch k. A job completes at
//   the end of its last epoch (max_epochs: Pollux's per-application
//   setting, else the shortest curve); that progress is default_work.
//   Pollux's simulator sets no target metric, so curves' metrics are unused.
// - During epoch k a batch of B earns gain = (var + sqr) / (var / s + sqr)
//   units of progress, s = B / initial batch size, with sqr and var from
//   row k of the validation curves, linear in B between validated batch
//   sizes (1 when var / s + sqr is 0). Efficiency = gain / s; goodput =
//   throughput x efficiency.
// - rate_at(progress) is gain_k(B) per batch time, k the epoch under way at
//   `progress`: Job.step's goodput. rate() averages over the whole training,
//   target / sum_k(length of epoch k / gain_k(B)) per batch time, so that
//   target / rate() is exactly Pollux's time on a fixed allocation; it
//   prices remaining times. A trace's duration becomes the work done in that
//   time from progress 0, epoch by epoch.
//
//   next_rate_change() is the end of the epoch under way, where the
//   simulator re-reads rate_at, as Job.step does.
//
// Simplifications:
// - Job.step rounds the time of each epoch end to a whole second; the model
//   does not, the simulator does with [simulation] rate_change_times =
//   "whole_seconds".
// - By default (`placement = "node_count"`) rate() prices a shape by its
//   node count, not its GPUs per node: the (nodes, replicas) table, exact
//   when those determine the placement (one node, one GPU per node, full
//   4-GPU nodes), else the mean over the measured placements. With
//   `placement = "exact"` it prices the shape's node_gpus as Pollux's
//   simulator prices Job.placement: a running job's real placement (GPUs per
//   node in the order it took the nodes), and for an estimate on a GPU count
//   (packed_shape) the packed placement (4, 4, ..., r) that Pollux's Optimus
//   (OptimusPolicy.predict_step_time) prices.
// - Pollux interpolates unmeasured placements with scipy's
//   LinearNDInterpolator over a Delaunay triangulation, whose choices on
//   this grid-like data cannot be reproduced. Here: linear in local batch
//   size within a (nodes, replicas) series, linear in replicas within a
//   node count, and linear between the two nearest measured node counts at
//   the same GPUs per node.
// - Queries outside the measurements (local or global batch sizes, replica
//   counts) are clamped to the nearest one, where Pollux's simulator fails;
//   its policies never ask. Shapes with more GPUs than the largest
//   validated batch size has samples still run one sample per GPU.
// - Not modelled here: the 30 s restart after every reallocation (the
//   `pollux` elasticity plugin's restart_seconds, [simulation]
//   start_overhead_seconds and preemption_overhead_seconds), interference,
//   GPU types. A fractional GPU
//   share slows steps in proportion. Clusters with more GPUs on a node than
//   any measured placement are refused, as Pollux assumes 4-GPU nodes.
#include "models/pollux_apps.hpp"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <numeric>
#include <optional>
#include <stdexcept>

#include "models/interpolation.hpp"
#include "models/models.hpp"
#include "common/csv_table.hpp"
#include "engine/errors.hpp"

namespace tessel {

namespace fs = std::filesystem;

namespace {

// Settings Pollux's simulator passes to Application beyond what the traces
// imply (0: from the traces).
struct PolluxSettings {
  std::string_view application;
  int max_epochs;
  int max_local_bsz;
};
constexpr PolluxSettings kPolluxSettings[] = {
    {"bert", 2, 0},      {"cifar10", 100, 0},     {"ncf", 10, 0},
    {"imagenet", 90, 0}, {"deepspeech2", 80, 0}, {"yolov3", 50, 8},
};

// Pollux's ceil() with its tolerance, so an exact quotient does not round up.
int tolerant_ceil(double x) { return static_cast<int>(std::ceil(x - 1e-8)); }

StepTime mix(StepTime from, StepTime to, double weight) {
  return {lerp(from.step, to.step, weight), lerp(from.sync, to.sync, weight)};
}

GradientStats mix(GradientStats from, GradientStats to, double weight) {
  return {lerp(from.sqr, to.sqr, weight), lerp(from.var, to.var, weight)};
}

double seconds_per_batch(StepTime time, int accum_steps) {
  return time.step + (time.step - time.sync) * accum_steps;
}

int replica_count(std::span<const int> placement) {
  return std::accumulate(placement.begin(), placement.end(), 0);
}

// Pollux's traces hold each placement once, as its smallest rotation.
std::vector<int> canonical_placement(std::span<const int> placement) {
  std::vector<int> nodes;
  for (int gpus : placement)
    if (gpus > 0) nodes.push_back(gpus);
  std::vector<int> smallest = nodes;
  for (std::size_t first = 1; first < nodes.size(); ++first) {
    std::vector<int> rotation(nodes.begin() + static_cast<std::ptrdiff_t>(first), nodes.end());
    rotation.insert(rotation.end(), nodes.begin(), nodes.begin() + static_cast<std::ptrdiff_t>(first));
    smallest = std::min(smallest, rotation);
  }
  return smallest;
}

// Measurements sharing a key are averaged, as Pollux's groupby().mean().
struct StepTimeSum {
  double step = 0;
  double sync = 0;
  int count = 0;
  void add(StepTime time) {
    step += time.step;
    sync += time.sync;
    ++count;
  }
};
using StepTimeSums = std::map<double, StepTimeSum>;  // by local batch size

std::map<double, StepTime> means(const StepTimeSums& sums) {
  std::map<double, StepTime> out;
  for (const auto& [local_bsz, sum] : sums) out[local_bsz] = {sum.step / sum.count, sum.sync / sum.count};
  return out;
}

StepTime read_step_time(const CsvTable& table) {
  const double step = table.number("step_time", 0);
  if (step <= 0) table.fail("step_time", "expected a positive number of seconds");
  const double sync = table.number("sync_time", 0);
  if (sync > step) table.fail("sync_time", "exceeds step_time, of which it is a part");
  return {step, sync};
}

std::vector<int> read_placement(const CsvTable& table) {
  const std::string_view text = table.text("placement");
  const bool digits = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '1' && c <= '9'; });
  if (!digits)
    table.fail("placement", "expected the GPUs on each node as digits 1-9, such as 22, got '" +
                                std::string(text) + "'");
  std::vector<int> gpus_per_node;
  for (char digit : text) gpus_per_node.push_back(digit - '0');
  return gpus_per_node;
}

// The batch size in a file name validation-<batch size>.csv; nullopt for other files.
std::optional<int> validated_batch_size(const fs::path& file) {
  constexpr std::string_view prefix = "validation-", suffix = ".csv";
  const std::string name = file.filename().string();
  if (!name.starts_with(prefix) || !name.ends_with(suffix)) return std::nullopt;
  const std::string_view digits = std::string_view(name).substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  int batch_size = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), batch_size);
  if (error != std::errc() || end != digits.data() + digits.size() || batch_size < 1)
    throw TraceError(file.string(), 0, "", "expected a name validation-<batch size>.csv with a positive integer");
  return batch_size;
}

}  // namespace

// ------------------------------------------------------------------ tables

PolluxApplication::StepTimeCurve::StepTimeCurve(const std::map<double, StepTime>& by_local_bsz) {
  for (const auto& [local_bsz, time] : by_local_bsz) {
    local_bsz_.push_back(local_bsz);
    times_.push_back(time);
  }
}

StepTime PolluxApplication::StepTimeCurve::at(double local_bsz) const {
  const GridPosition position = locate(local_bsz_, local_bsz);
  return mix(times_[position.lower], times_[position.upper], position.weight);
}

StepTime PolluxApplication::NodeLayer::at(double replica_count, double local_bsz) const {
  const GridPosition position = locate(replicas, replica_count);
  return mix(curves[position.lower].at(local_bsz), curves[position.upper].at(local_bsz), position.weight);
}

// ------------------------------------------------------------------ loading

PolluxApplication PolluxApplication::load(const fs::path& directory) {
  PolluxApplication app;
  app.name_ = directory.filename().string();
  app.read_step_times(directory);
  app.read_epochs(directory, app.read_validation(directory));
  return app;
}

void PolluxApplication::read_step_times(const fs::path& directory) {
  std::map<std::vector<int>, StepTimeSums> by_placement;
  std::map<int, std::map<int, StepTimeSums>> by_nodes;  // nodes -> replicas -> local batch size
  min_local_bsz_ = INT_MAX;
  {
    CsvTable table((directory / "placements.csv").string(), {"placement", "local_bsz", "step_time", "sync_time"}, {});
    while (table.next()) {
      const std::vector<int> placement = read_placement(table);
      const int local_bsz = static_cast<int>(table.integer("local_bsz", 1, INT_MAX));
      const StepTime time = read_step_time(table);
      by_placement[placement][local_bsz].add(time);
      by_nodes[static_cast<int>(placement.size())][replica_count(placement)][local_bsz].add(time);
      min_local_bsz_ = std::min(min_local_bsz_, local_bsz);
      max_local_bsz_ = std::max(max_local_bsz_, local_bsz);
      max_gpus_per_node_ = std::max(max_gpus_per_node_, *std::max_element(placement.begin(), placement.end()));
    }
    if (by_placement.empty()) throw TraceError(table.path(), 0, "", "no measurements");
  }
  {
    CsvTable table((directory / "scalability.csv").string(),
                   {"num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time"}, {});
    while (table.next()) {
      const auto nodes = static_cast<int>(table.integer("num_nodes", 1, INT_MAX));
      const auto replicas = static_cast<int>(table.integer("num_replicas", nodes, INT_MAX));
      const int local_bsz = static_cast<int>(table.integer("local_bsz", 1, INT_MAX));
      by_nodes[nodes][replicas][local_bsz].add(read_step_time(table));
    }
  }
  for (const auto& [placement, sums] : by_placement) by_placement_.emplace(placement, StepTimeCurve(means(sums)));
  for (const auto& [nodes, by_replicas] : by_nodes) {
    NodeLayer& layer = by_nodes_[nodes];
    for (const auto& [replicas, sums] : by_replicas) {
      layer.replicas.push_back(replicas);
      layer.curves.emplace_back(means(sums));
    }
  }
}

std::map<int, fs::path> PolluxApplication::read_validation(const fs::path& directory) {
  std::map<int, fs::path> files;  // by batch size
  for (const fs::directory_entry& entry : fs::directory_iterator(directory)) {
    const std::optional<int> batch_size = validated_batch_size(entry.path());
    if (!batch_size) continue;
    const auto [first, inserted] = files.emplace(*batch_size, entry.path());
    if (!inserted)
      throw TraceError(entry.path().string(), 0, "", "repeats the batch size of " + first->second.string());
  }
  if (files.empty()) throw TraceError(directory.string(), 0, "", "no validation-<batch size>.csv files");
  for (const auto& [batch_size, file] : files) {
    ValidationCurve& curve = validation_.emplace_back();
    curve.batch_size = batch_size;
    validated_batch_sizes_.push_back(batch_size);
    CsvTable table(file.string(), {"progress", "grad_sqr", "grad_var"}, {"iteration", "metric"});
    while (table.next()) {
      const double progress = table.number("progress", 0);
      if (!curve.progress.empty() && progress < curve.progress.back())
        table.fail("progress", "decreases from the previous epoch's");
      curve.progress.push_back(progress);
      curve.stats.push_back({table.number("grad_sqr", 0), table.number("grad_var", 0)});
    }
  }
  init_batch_size_ = validation_.front().batch_size;
  max_batch_size_ = validation_.back().batch_size;
  if (max_batch_size_ < min_local_bsz_)
    throw TraceError(directory.string(), 0, "",
                     "the largest validated batch size, " + std::to_string(max_batch_size_) +
                         ", is below the smallest local batch size in placements.csv, " +
                         std::to_string(min_local_bsz_));
  return files;
}

void PolluxApplication::read_epochs(const fs::path& directory, const std::map<int, fs::path>& validation_files) {
  std::size_t epochs = SIZE_MAX;
  for (const ValidationCurve& curve : validation_) epochs = std::min(epochs, curve.progress.size());
  for (const PolluxSettings& settings : kPolluxSettings) {
    if (settings.application != name_) continue;
    epochs = static_cast<std::size_t>(settings.max_epochs);
    if (settings.max_local_bsz > 0) max_local_bsz_ = settings.max_local_bsz;
  }
  if (epochs == 0) throw TraceError(directory.string(), 0, "", "a validation curve has no epochs");
  for (const ValidationCurve& curve : validation_)
    if (curve.progress.size() < epochs)
      throw TraceError(validation_files.at(curve.batch_size).string(), 0, "",
                       "holds " + std::to_string(curve.progress.size()) + " of the " + std::to_string(epochs) +
                           " epochs Pollux trains " + name_ + " for");
  epoch_start_.assign(1, 0.0);
  for (std::size_t epoch = 0; epoch < epochs; ++epoch) {
    double end = INFINITY;
    for (const ValidationCurve& curve : validation_) end = std::min(end, curve.progress[epoch]);
    epoch_start_.push_back(end);
  }
  if (!(target_progress() > 0)) throw TraceError(directory.string(), 0, "", "the validation curves make no progress");
}

// ------------------------------------------------------------------ queries

int PolluxApplication::epoch_at(double progress) const {
  return static_cast<int>(std::upper_bound(epoch_start_.begin() + 1, epoch_start_.end(), progress) -
                          (epoch_start_.begin() + 1));
}

double PolluxApplication::epoch_end_after(double progress) const {
  const int epoch = epoch_at(progress);
  return epoch < max_epochs() ? epoch_start(epoch + 1) : INFINITY;
}

StepTime PolluxApplication::step_time(std::span<const int> placement, double local_bsz) const {
  const std::vector<int> key = canonical_placement(placement);
  if (key.empty()) throw std::invalid_argument("step_time of a placement with no GPUs");
  if (auto it = by_placement_.find(key); it != by_placement_.end()) return it->second.at(local_bsz);
  return step_time(static_cast<int>(key.size()), replica_count(key), local_bsz);
}

StepTime PolluxApplication::step_time(int nodes, int replicas, double local_bsz) const {
  nodes = std::clamp(nodes, by_nodes_.begin()->first, by_nodes_.rbegin()->first);
  const auto above = by_nodes_.lower_bound(nodes);
  if (above->first == nodes) return above->second.at(replicas, local_bsz);
  // Between two measured node counts, compare like with like: the same GPUs per node.
  const auto below = std::prev(above);
  const double per_node = static_cast<double>(replicas) / nodes;
  const double weight = static_cast<double>(nodes - below->first) / (above->first - below->first);
  return mix(below->second.at(per_node * below->first, local_bsz),
             above->second.at(per_node * above->first, local_bsz), weight);
}

BatchSplit PolluxApplication::split(int batch_size, int replicas) const {
  if (batch_size <= 0) batch_size = std::max(init_batch_size_, min_local_bsz_ * replicas);
  const int local_bsz = tolerant_ceil(static_cast<double>(batch_size) / replicas);
  BatchSplit split;
  split.accum_steps = tolerant_ceil(static_cast<double>(local_bsz) / max_local_bsz_) - 1;
  // Pollux accumulates at least once on one GPU: the gradient statistics
  // need two micro-batches to be estimated.
  if (replicas == 1 && batch_size > init_batch_size_) split.accum_steps = std::max(1, split.accum_steps);
  split.atomic_bsz = tolerant_ceil(static_cast<double>(local_bsz) / (split.accum_steps + 1));
  split.atomic_bsz = std::min(split.atomic_bsz, max_batch_size_ / (replicas * (split.accum_steps + 1)));
  split.atomic_bsz = std::max(split.atomic_bsz, 1);
  return split;
}

double PolluxApplication::throughput(std::span<const int> placement, BatchSplit split) const {
  const double samples = static_cast<double>(replica_count(placement)) * split.atomic_bsz * (split.accum_steps + 1);
  return samples / seconds_per_batch(step_time(placement, split.atomic_bsz), split.accum_steps);
}

GradientStats PolluxApplication::stats_in_epoch(double batch_size, int epoch) const {
  const GridPosition position = locate(validated_batch_sizes_, batch_size);
  const auto row = static_cast<std::size_t>(epoch);
  return mix(validation_[position.lower].stats[row], validation_[position.upper].stats[row], position.weight);
}

GradientStats PolluxApplication::gradient_stats(double batch_size, double progress) const {
  return stats_in_epoch(batch_size, std::min(epoch_at(progress), max_epochs() - 1));
}

double PolluxApplication::gain(double batch_size, GradientStats stats) const {
  const double scale = batch_size / init_batch_size_;
  const double denominator = stats.var / scale + stats.sqr;
  return denominator > 0 ? (stats.var + stats.sqr) / denominator : 1.0;
}

double PolluxApplication::efficiency(double batch_size, GradientStats stats) const {
  return gain(batch_size, stats) / (batch_size / init_batch_size_);
}

double PolluxApplication::goodput(std::span<const int> placement, BatchSplit split, double progress) const {
  const double batch_size = static_cast<double>(replica_count(placement)) * split.atomic_bsz * (split.accum_steps + 1);
  return throughput(placement, split) * efficiency(batch_size, gradient_stats(batch_size, progress));
}

double PolluxApplication::mean_gain(double batch_size) const {
  double batches = 0;  // to reach the target, per unit of gain
  for (int epoch = 0; epoch < max_epochs(); ++epoch) {
    const double length = epoch_start(epoch + 1) - epoch_start(epoch);
    batches += length / gain(batch_size, stats_in_epoch(batch_size, epoch));
  }
  return target_progress() / batches;
}

BatchSizeRange PolluxApplication::batch_sizes(int replicas) const {
  return {std::max(init_batch_size_, min_local_bsz_ * replicas), max_batch_size_};
}

PolluxApplication::BatchRun PolluxApplication::run_batch(int nodes, int replicas, int batch_size,
                                                         std::span<const int> placement) const {
  const BatchSplit batch = split(batch_size, replicas);
  const StepTime time =
      placement.empty() ? step_time(nodes, replicas, batch.atomic_bsz) : step_time(placement, batch.atomic_bsz);
  return {static_cast<double>(replicas) * batch.atomic_bsz * (batch.accum_steps + 1),
          seconds_per_batch(time, batch.accum_steps)};
}

double PolluxApplication::progress_rate(int nodes, int replicas, int batch_size,
                                        std::span<const int> placement) const {
  const BatchRun batch = run_batch(nodes, replicas, batch_size, placement);
  return mean_gain(batch.samples) / batch.seconds;
}

double PolluxApplication::progress_rate_at(int nodes, int replicas, int batch_size, double progress,
                                           std::span<const int> placement) const {
  const BatchRun batch = run_batch(nodes, replicas, batch_size, placement);
  return gain(batch.samples, gradient_stats(batch.samples, progress)) / batch.seconds;
}

// ------------------------------------------------------------------ the model

PolluxAppsModel::PolluxAppsModel(const fs::path& apps_directory, PolluxPlacementPricing pricing)
    : pricing_(pricing) {
  std::error_code error;
  if (!fs::is_directory(apps_directory, error))
    throw UserError("'" + apps_directory.string() + "' is not a directory");
  std::vector<fs::path> directories;
  for (const fs::directory_entry& entry : fs::directory_iterator(apps_directory))
    if (entry.is_directory() && !entry.path().filename().string().starts_with('.')) directories.push_back(entry.path());
  std::sort(directories.begin(), directories.end());
  for (const fs::path& directory : directories) {
    applications_.push_back(PolluxApplication::load(directory));
    names_.push_back(applications_.back().name());
  }
  if (applications_.empty())
    throw UserError("'" + apps_directory.string() +
                    "' holds no application directories (such as cifar10/ with placements.csv)");
}

const PolluxApplication* PolluxAppsModel::application(std::string_view name) const {
  const auto it = std::lower_bound(names_.begin(), names_.end(), name);
  if (it == names_.end() || *it != name) return nullptr;
  return &applications_[static_cast<std::size_t>(it - names_.begin())];
}

const PolluxApplication& PolluxAppsModel::application_of(const JobSpec& job) const {
  const PolluxApplication* app = application(job.model);
  if (app == nullptr) throw std::invalid_argument("pollux-apps has no application '" + job.model + "'");
  return *app;
}

namespace {
int batch_size_of(const JobSpec& job, const Shape& shape) {
  return shape.layout.batch_size > 0 ? shape.layout.batch_size : job.batch_size;
}
}  // namespace

std::span<const int> PolluxAppsModel::placement_of(const Shape& shape) const {
  if (pricing_ != PolluxPlacementPricing::exact) return {};
  if (std::accumulate(shape.node_gpus.begin(), shape.node_gpus.end(), 0) != shape.gpus) return {};
  return shape.node_gpus;
}

double PolluxAppsModel::rate(const JobSpec& job, const Shape& shape) const {
  const PolluxApplication& app = application_of(job);
  if (shape.gpus < 1) return 0;
  const int nodes = std::clamp(shape.nodes, 1, shape.gpus);
  return app.progress_rate(nodes, shape.gpus, batch_size_of(job, shape), placement_of(shape)) *
         (shape.gpu_milli / 1000.0);
}

double PolluxAppsModel::rate_at(const JobSpec& job, const Shape& shape, double progress) const {
  const PolluxApplication& app = application_of(job);
  if (shape.gpus < 1) return 0;
  const int nodes = std::clamp(shape.nodes, 1, shape.gpus);
  return app.progress_rate_at(nodes, shape.gpus, batch_size_of(job, shape), progress, placement_of(shape)) *
         (shape.gpu_milli / 1000.0);
}

double PolluxAppsModel::next_rate_change(const JobSpec& job, double progress) const {
  return application_of(job).epoch_end_after(progress);
}

std::optional<BatchSizeRange> PolluxAppsModel::batch_sizes(const JobSpec& job, int gpus) const {
  return application_of(job).batch_sizes(gpus);
}

double PolluxAppsModel::default_work(const JobSpec& job) const {
  const PolluxApplication* app = application(job.model);
  return app == nullptr ? 0 : app->target_progress();
}

std::string PolluxAppsModel::check(const ClusterState& cluster) const {
  int measured = 0;
  for (const PolluxApplication& app : applications_) measured = std::max(measured, app.max_gpus_per_node());
  for (const Node& node : cluster.nodes())
    if (node.spec.gpus > measured)
      return "node '" + node.spec.name + "' has " + std::to_string(node.spec.gpus) +
             " GPUs; the measured placements have at most " + std::to_string(measured) + " per node";
  return {};
}

std::unique_ptr<ThroughputModel> parse_pollux_apps_model(TableReader& arguments, const ModelSettings&) {
  const std::optional<std::string> directory = arguments.input_path("path", std::nullopt);
  const std::optional<std::string> placement = arguments.choice("placement", {"node_count", "exact"}, "node_count");
  if (!directory || !placement) return nullptr;
  const PolluxPlacementPricing pricing =
      *placement == "exact" ? PolluxPlacementPricing::exact : PolluxPlacementPricing::by_node_count;
  try {
    return std::make_unique<PolluxAppsModel>(*directory, pricing);
  } catch (const UserError& e) {
    arguments.error("path", "pollux-apps: " + std::string(e.what()));
  } catch (const fs::filesystem_error& e) {
    arguments.error("path", "pollux-apps: " + std::string(e.what()));
  }
  return nullptr;
}

}  // namespace tessel
