// gittins: discretized two-dimensional Gittins index (2D-Gittins).
//
// Paper: J. Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep
// Learning", NSDI'19, §3.2. The Gittins index of a job that has attained
// service a, with S the service a job needs in all, is
//   G(a) = P(S - a <= D | S > a) / E[min(S - a, D) | S > a]
// for a service quantum D: the chance to finish within the next quantum per
// unit of service it is expected to take. Service is two-dimensional, GPUs x
// executed time, and S follows a GPU-time distribution learned from past jobs.
// Semantics follow the authors' simulator, SymbioticLab/Tiresias,
// simulator/run_sim.py: `parse_job_dist` and `cal_r_gittins_index` (the
// index), `get_gittins_index` (the lookup) and `dlas_sim_jobs` with the
// `dlas-gpu-gittins` schedule (queues and order).
//
// Rule as implemented:
//   * Queues as in `tiresias` (discretized_queues.hpp): GPU-seconds since
//     arrival or the last promotion place a job in one of the queues of
//     `queue_thresholds_gpu_seconds`, higher queues first, with the same
//     starvation guard `promote_knob`. The same service is the a of the index.
//   * Within a queue, higher index first, ties by arrival (the simulator sorts
//     each queue by index, then by submission, before every pass). Running
//     jobs have no precedence of their own, unlike in 2D-LAS: a job whose
//     index drops below a waiting job's is preempted.
//   * The index, from the sorted samples s_0 <= ... <= s_(n-1) of the
//     `duration` column of `distribution` and the fixed quantum D = `delta`:
//     let i be the number of samples <= a. If i = n, the job has attained at
//     least the largest sample and its index is 0, the lowest. Otherwise the
//     index is the one at a_i = s_i - 1 (the simulator tabulates one value per
//     sample, so the index is constant between samples): with j the number of
//     samples <= a_i + D,
//       P = (j - i) / (n - i),  E = (s_i + ... + s_(j-1) + D (n - j)) / (n - i),
//     and the index is P / E. The table is built at construction in
//     O(n log n); a lookup is a binary search.
//   * Running jobs keep what they hold, waiting jobs ask for their request;
//     a job that does not fit is skipped and later jobs may start.
//   * `selection = "greedy_by_count"` chooses the running set afresh each
//     round down the queues by the cluster's GPU count, as the simulator
//     does; see `tiresias` and discretized_queues.hpp.
//
// Simplifications and differences:
//   * The quantum is fixed (the simulator's static delta); the paper's sup
//     over quanta is not taken.
//   * Two quirks of the simulator's formula are kept, because they decide
//     orders and a reproduction needs them: E sums the whole sizes s_k of
//     the jobs that finish within the quantum, where the paper's
//     E[min(S - a, D)] would count only what is left of them, s_k - a; and
//     when a_i + D > s_(n-1) - 1 (every surviving job would finish within the
//     quantum) the simulator takes j = n - 1 rather than n, so the largest
//     sample counts as surviving: a job past every sample but the largest one
//     gets index 0 too.
//   * The simulator rounds P and E to 5 decimals and the index, scaled by
//     10^6, to 4 (cal_r_gittins_index), which makes jobs whose indices differ
//     by less than that ties, decided by the earlier submission; by default
//     we keep full precision, `simulator_rounding = true` rounds as it does.
//     Reasons show the index scaled by 10^6, as the simulator does.
//   * On a clock, queues are re-evaluated at round boundaries; the plan's
//     revisit_at is the next threshold crossing, for rounds at events (see
//     discretized_queues.hpp). The index is re-read only at rounds: at
//     events, as in the simulator, it may be stale in between.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include <tessel/tessel.hpp>

#include <tessel/allocation.hpp>
#include <tessel/discretized_queues.hpp>

namespace {

constexpr tessel::ArgSpec kArgs[] = {
    {"distribution", tessel::ArgType::string, nullptr,
     "CSV file of past jobs' GPU-seconds in a 'duration' column, such as Tiresias's yarn-gput1000.csv; "
     "relative to the config file"},
    {"delta", tessel::ArgType::number, "3250", "service quantum of the Gittins index, in GPU-seconds"},
    {"simulator_rounding", tessel::ArgType::boolean, "false",
     "round as Tiresias's simulator: P and E to 5 decimals, the index x 10^6 to 4, ties to the earlier "
     "submission"},
    tessel::discretized::kThresholdsArg,
    tessel::discretized::kPromoteKnobArg,
    tessel::discretized::kSelectionArg,
};

// Fields of one CSV line (no quoting: the distribution files hold numbers).
std::vector<std::string_view> fields_of(std::string_view line) {
  std::vector<std::string_view> fields;
  while (true) {
    const std::size_t comma = line.find(',');
    std::string_view field = line.substr(0, comma);
    while (!field.empty() && (field.front() == ' ' || field.front() == '\t')) field.remove_prefix(1);
    while (!field.empty() && (field.back() == ' ' || field.back() == '\t' || field.back() == '\r'))
      field.remove_suffix(1);
    fields.push_back(field);
    if (comma == std::string_view::npos) return fields;
    line.remove_prefix(comma + 1);
  }
}

// The `duration` column of `path`, sorted. Any problem is the argument's.
std::vector<double> read_durations(const std::string& path) {
  auto fail = [](const std::string& message) { return tessel::ArgumentError("distribution", message); };
  std::ifstream in(path);
  if (!in) throw fail("cannot open '" + path + "'");
  std::string line;
  if (!std::getline(in, line)) throw fail("'" + path + "' is empty; it needs a header with a 'duration' column");
  const std::vector<std::string_view> header = fields_of(line);
  const auto found = std::find(header.begin(), header.end(), "duration");
  if (found == header.end()) throw fail("'" + path + "' has no 'duration' column in its header: " + line);
  const std::size_t column = static_cast<std::size_t>(found - header.begin());

  std::vector<double> durations;
  for (int line_number = 2; std::getline(in, line); ++line_number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::vector<std::string_view> fields = fields_of(line);
    const std::string where = path + ":" + std::to_string(line_number) + ": ";
    if (fields.size() <= column) throw fail(where + "no duration field");
    const std::string_view text = fields[column];
    double value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size())
      throw fail(where + "duration '" + std::string(text) + "' is not a number");
    if (!(value > 0) || !std::isfinite(value))
      throw fail(where + "duration " + std::string(text) + " is not a positive GPU-time");
    durations.push_back(value);
  }
  if (durations.empty()) throw fail("'" + path + "' holds no durations");
  std::sort(durations.begin(), durations.end());
  return durations;
}

// The Gittins index of attained service, tabulated over the samples.
class GittinsTable {
 public:
  GittinsTable(std::vector<double> sorted_samples, double delta, bool simulator_rounding)
      : samples_(std::move(sorted_samples)) {
    // Python's round() of the simulator, to `decimals` places (halves to
    // even there, away from zero here: a tie of the last digit decides nothing
    // the samples' integers can produce).
    auto rounded = [&](double value, int decimals) {
      if (!simulator_rounding) return value;
      const double scale = std::pow(10.0, decimals);
      return std::round(value * scale) / scale;
    };
    const std::size_t n = samples_.size();
    std::vector<double> prefix(n + 1, 0.0);  // prefix[k] = s_0 + ... + s_(k-1)
    std::partial_sum(samples_.begin(), samples_.end(), prefix.begin() + 1);
    index_.resize(n);
    for (std::size_t k = 0; k < n; ++k) {
      const double attained = samples_[k] - 1;  // just below sample k, in whole GPU-seconds
      const std::size_t i = count_at_most(attained);
      const double horizon = attained + delta;
      const std::size_t j = horizon > samples_.back() - 1 ? n - 1 : count_at_most(horizon);
      const double survivors = static_cast<double>(n - i);
      const double finish_chance = rounded((static_cast<double>(j) - static_cast<double>(i)) / survivors, 5);
      const double expected_service =
          rounded((prefix[j] - prefix[i] + delta * static_cast<double>(n - j)) / survivors, 5);
      // The simulator's rank is the index x 10^6 to 4 decimals; kept unscaled.
      index_[k] = simulator_rounding ? rounded(finish_chance * 1e6 / expected_service, 4) / 1e6
                                     : finish_chance / expected_service;
    }
  }

  // 0 once `service` reaches the largest sample.
  double index(double service) const {
    const std::size_t i = count_at_most(service);
    return i == samples_.size() ? 0.0 : index_[i];
  }
  double largest_sample() const { return samples_.back(); }

 private:
  std::size_t count_at_most(double service) const {
    return static_cast<std::size_t>(std::upper_bound(samples_.begin(), samples_.end(), service) - samples_.begin());
  }

  std::vector<double> samples_;
  std::vector<double> index_;  // [i]: the index of a service with exactly i samples at or below it
};

double positive_delta(const tessel::PluginContext& context) {
  const double delta = context.args().number("delta");
  if (!(delta > 0) || !std::isfinite(delta))
    throw tessel::ArgumentError("delta", "must be a positive number of GPU-seconds");
  return delta;
}

class Gittins final : public tessel::AllocationPolicy {
 public:
  explicit Gittins(const tessel::PluginContext& context)
      : queues_(context),
        table_(read_durations(context.resolve(context.args().string("distribution"))), positive_delta(context),
               context.args().boolean("simulator_rounding")),
        greedy_by_count_(tessel::discretized::greedy_by_count(context)) {}

  // Jobs move between queues, and their indices change, as they run and wait.
  bool time_sensitive() const override { return true; }
  // It reads GPU-seconds through SchedulerView::gpu_seconds
  // (discretized_queues.hpp), current without rounds accounting every running
  // job; so they need not (lazy progress). Except under the simulator's rules
  // (greedy_by_count), run with rounds at events: there rounds fall at
  // computed crossing moments, fractional seconds, where GPU time summed
  // once differs from the per-round sum in its last bit, and the published
  // figures of those runs would move.
  bool reads_progress() const override { return greedy_by_count_; }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    order_.clear();
    double revisit_at = std::numeric_limits<double>::infinity();
    for (const tessel::JobState* job : view.active()) {
      const tessel::discretized::Standing standing = queues_.update(view, *job);
      revisit_at = std::min(revisit_at, queues_.revisit_at(*job, standing, view.now()));
      const double index = table_.index(standing.service);
      order_.push_back({job, standing.queue, index, reason(standing, index)});
    }
    std::sort(order_.begin(), order_.end(), [](const Ranked& a, const Ranked& b) {
      if (a.queue != b.queue) return a.queue < b.queue;
      if (a.index != b.index) return a.index > b.index;
      return a.job->spec.id < b.job->spec.id;  // ids follow arrival
    });
    tessel::AllocationPlan plan;
    // Queue changes only: Tiresias's simulator re-ranks by index at events and
    // queue changes, not each time a job's service passes a sample.
    plan.revisit_at = revisit_at;
    plan.ranked.reserve(order_.size());
    for (const Ranked& entry : order_)
      plan.ranked.push_back({entry.job->spec.id, tessel::allocation::current_or_requested(*entry.job),
                             entry.reason});
    if (greedy_by_count_) {
      tessel::discretized::select_greedy_by_count(view, plan.ranked, skipped_);
      plan.revisit_at = std::min(plan.revisit_at, queues_.revisit_after_selection(view, plan.ranked, view.now()));
    }
    return plan;
  }

 private:
  struct Ranked {
    const tessel::JobState* job;
    int queue;
    double index;
    tessel::Reason reason;
  };

  tessel::Reason reason(const tessel::discretized::Standing& standing, double index) const {
    if (standing.promoted_now) return queues_.reason(standing);
    const int queue = standing.queue + 1;
    if (standing.service >= table_.largest_sample())
      return tessel::Reason(
          "queue {} of {}: Gittins index 0, {} GPU-s is past the largest sample ({}) of the distribution", queue,
          queues_.count(), standing.service, table_.largest_sample());
    return tessel::Reason("queue {} of {}: Gittins index {} at {} GPU-s; higher index runs first", queue,
                          queues_.count(), index * 1e6, standing.service);
  }

  tessel::discretized::Queues queues_;
  GittinsTable table_;
  bool greedy_by_count_;
  std::vector<Ranked> order_;  // reused across rounds
  std::vector<tessel::Grant> skipped_;  // reused across rounds (greedy_by_count)
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(Gittins, allocation, "gittins", "1.2",
                        "Tiresias discretized 2D-Gittins index: queues by attained GPU-seconds, Gittins index "
                        "from a GPU-time distribution within a queue",
                        kArgs)
