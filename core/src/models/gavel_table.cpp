// `gavel-table`: Gavel's measured throughputs.
//
// Source: stanford-futuredata/gavel (MIT), scheduler/simulation_throughputs.json,
// the table Gavel's simulator runs on (Narayanan et al., OSDI'20). Top-level
// keys are GPU types (`k80`, `p100`, `v100`) and `<type>_unconsolidated`
// for multi-GPU jobs whose GPUs sit on different servers. Under each, a job
// key "('<job type>', <scale factor>)" holds `"null"`, the steps/s of the
// whole job running alone on <scale factor> GPUs, and one [own, partner]
// steps/s pair per job it was measured sharing those GPUs with.
//
// The rule, following scheduler/utils.py (read_all_throughputs_json_v2,
// parse_job_type_tuple, generate_job) and scheduler/scheduler.py
// (_set_initial_throughput, _get_num_steps): work is steps, and a job of
// type `JobSpec::model` on `shape.gpus` GPUs of `shape.gpu_type` runs at the
// "null" throughput of (model, shape.gpus). A trace duration becomes steps
// at the reference shape's throughput, as Gavel's generator multiplies the
// duration by the reference worker type's throughput.
//
// Where tessel goes beyond Gavel, or simplifies:
// - Placement. Gavel's simulator prices every allocation with the
//   consolidated tables (its worker types are k80, p100, v100; the
//   `_unconsolidated` tables are only filtered out, in
//   _initialize_throughput_estimator), and its placement merely prefers
//   few servers. tessel prices a shape spanning several nodes with the
//   `<type>_unconsolidated` table, falling back per GPU count to the
//   consolidated entry where that table has none (`k80_unconsolidated` lacks
//   ResNet-50 with batch size 64 or 128 on 2, 4 and 8 GPUs).
//   `unconsolidated = false` prices every shape as consolidated, as Gavel
//   does.
// - GPU counts. A Gavel job always gets exactly its scale factor (1, 2, 4
//   or 8). For other counts tessel scales linearly from the largest measured
//   count below (from the smallest measured count when all are above), so 16
//   GPUs run twice as fast as 8, and a single-GPU job type (A3C, CycleGAN,
//   Recommendation) on 4 GPUs four times as fast as on one.
// - Zeros. Gavel records 0 where a job did not run (ResNet-50 with batch
//   size 128 on 2 or more K80s); its policies then give the job no time on
//   that type. A rate must be positive, so a zero counts as not measured and
//   the count is priced by the scaling rule above.
// - Fractional GPUs. Gavel has none; a share of each GPU scales the rate by
//   that share, as in the linear model.
// - Space sharing. A job sharing its GPUs with one other job (never more:
//   max_colocated() is 2) runs at its own entry of the measured [own,
//   partner] pair, as Gavel's simulator prices pairs (scheduler.py,
//   _populate_job_combination_metadata). Pairs exist for equal scale
//   factors only; on several GPUs Gavel measured 0 for every pair (they
//   cannot share), and such a pair is priced 0. A pair missing from the
//   table is an error naming the file. Its unconsolidated tables repeat the
//   consolidated pairs, so only the consolidated ones are kept, and a
//   shared shape is priced as consolidated.
// - GPU type names match case-insensitively ("V100" is `v100`).
// - Random job types. Gavel's generator (scheduler/utils.py, generate_job)
//   draws the scale factor first and then a job type among the distributed
//   ones (job_table.py) when it is above 1. profile_suits says the same: a
//   job type measured on more than one GPU suits any GPU count, the others
//   (A3C, CycleGAN, Recommendation) single-GPU jobs only.
#include "models/gavel_table.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/errors.hpp"
#include "models/models.hpp"

namespace tessel {

namespace {

constexpr std::string_view kUnconsolidatedSuffix = "_unconsolidated";

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string lowercase(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), lower);
  return out;
}

bool equal_ignoring_case(std::string_view a, std::string_view lower_b) {
  return a.size() == lower_b.size() &&
         std::equal(a.begin(), a.end(), lower_b.begin(), [](char x, char y) { return lower(x) == y; });
}

// "v100_unconsolidated" -> {"v100", spread}.
struct TableName {
  std::string gpu_type;  // lower case
  bool spread = false;
};

TableName parse_table_name(std::string_view table) {
  const bool spread = table.ends_with(kUnconsolidatedSuffix);
  if (spread) table.remove_suffix(kUnconsolidatedSuffix.size());
  return {lowercase(table), spread};
}

struct JobKey {
  std::string job_type;
  int gpus = 0;
};

// "('ResNet-50 (batch size 64)', 4)" -> {"ResNet-50 (batch size 64)", 4}. The
// job type may itself hold quotes and commas, so the count is what follows
// the last "', ".
std::optional<JobKey> parse_job_key(std::string_view key) {
  constexpr std::string_view open = "('", separator = "', ", close = ")";
  if (!key.starts_with(open) || !key.ends_with(close)) return std::nullopt;
  const std::string_view inner = key.substr(open.size(), key.size() - open.size() - close.size());
  const std::size_t split = inner.rfind(separator);
  if (split == std::string_view::npos || split == 0) return std::nullopt;
  const std::string_view digits = inner.substr(split + separator.size());
  JobKey parsed{std::string(inner.substr(0, split)), 0};
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), parsed.gpus);
  if (error != std::errc() || end != digits.data() + digits.size() || parsed.gpus < 1) return std::nullopt;
  return parsed;
}

JobKey job_key_or_throw(const std::string& table, const std::string& key) {
  auto parsed = parse_job_key(key);
  if (!parsed)
    throw UserError("under \"" + table + "\", key \"" + key +
                    "\" is not of the form \"('<job type>', <GPU count>)\"");
  return *std::move(parsed);
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    throw UserError(std::string("cannot open: ") + std::strerror(error));
  }
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    // Drop the "[json.exception.parse_error.101] " prefix; the rest says where.
    std::string_view what = e.what();
    if (const std::size_t end = what.find("] "); what.starts_with("[json.") && end != std::string_view::npos)
      what.remove_prefix(end + 2);
    throw UserError(std::string(what));
  }
}

}  // namespace

GavelTableModel::GavelTableModel(const std::string& path, bool use_unconsolidated) try : path_(path) {
  const nlohmann::json root = read_json(path);
  if (!root.is_object()) throw UserError("expected an object of GPU types at the top level");

  // GPU types and job types first, so that curves can be indexed.
  std::set<std::string> job_types;
  for (const auto& [table, entries] : root.items()) {
    if (!entries.is_object()) throw UserError("\"" + table + "\" must be an object of job entries");
    const TableName name = parse_table_name(table);
    if (!name.spread) {
      if (gpu_type_index(name.gpu_type)) throw UserError("GPU type \"" + table + "\" appears twice");
      gpu_types_.push_back(name.gpu_type);
    }
    for (const auto& [key, entry] : entries.items()) job_types.insert(job_key_or_throw(table, key).job_type);
  }
  if (gpu_types_.empty()) throw UserError("holds no GPU types");
  job_types_.assign(job_types.begin(), job_types.end());
  for (std::size_t i = 0; i < job_types_.size(); ++i) job_type_indices_.emplace(job_types_[i], i);
  curves_.resize(gpu_types_.size() * 2 * job_types_.size());

  auto measure = [](ScalingCurve& curve, int gpus, double steps_per_second) {
    auto at = std::find_if(curve.begin(), curve.end(), [&](const Measurement& m) { return m.gpus >= gpus; });
    if (at != curve.end() && at->gpus == gpus)
      at->steps_per_second = steps_per_second;
    else
      curve.insert(at, {gpus, steps_per_second});
  };
  auto isolated_throughput = [](const std::string& table, const std::string& key, const nlohmann::json& entry) {
    if (!entry.is_object() || !entry.contains("null") || !entry["null"].is_number())
      throw UserError("under \"" + table + "\", \"" + key + "\" needs a number under \"null\"");
    return entry["null"].get<double>();
  };

  // Consolidated tables before unconsolidated ones, which override them.
  for (const bool spread : {false, true}) {
    for (const auto& [table, entries] : root.items()) {
      const TableName name = parse_table_name(table);
      if (name.spread != spread) continue;
      const auto type = gpu_type_index(name.gpu_type);
      if (!type) throw UserError("\"" + table + "\" has no consolidated table \"" + name.gpu_type + "\"");
      for (const auto& [key, entry] : entries.items()) {
        const JobKey job = job_key_or_throw(table, key);
        const std::size_t job_type = job_type_indices_.at(job.job_type);
        const double steps_per_second = isolated_throughput(table, key, entry);
        if (steps_per_second > 0 && (!spread || use_unconsolidated)) {
          if (!spread) measure(curves_[curve_index(*type, false, job_type)], job.gpus, steps_per_second);
          measure(curves_[curve_index(*type, true, job_type)], job.gpus, steps_per_second);
        }
        for (const auto& [partner_key, rates] : entry.items()) {
          if (partner_key == "null") continue;
          const JobKey partner = job_key_or_throw(table, partner_key);
          if (!rates.is_array() || rates.size() != 2 || !rates[0].is_number() || !rates[1].is_number())
            throw UserError("under \"" + table + "\", \"" + key + "\": \"" + partner_key +
                            "\" must be a pair of numbers");
          const auto partner_type = job_type_index(partner.job_type);
          const double own = rates[0].get<double>(), other = rates[1].get<double>();
          if (spread || !partner_type || partner.gpus != job.gpus) continue;
          colocated_[{*type, job_type, job.gpus, *partner_type}] = {std::max(own, 0.0), std::max(other, 0.0)};
        }
      }
    }
  }
  distributed_.assign(job_types_.size(), false);
  for (std::size_t type = 0; type < gpu_types_.size(); ++type)
    for (std::size_t job_type = 0; job_type < job_types_.size(); ++job_type)
      for (const Measurement& m : curve(type, false, job_type))
        if (m.gpus > 1) distributed_[job_type] = true;
} catch (const UserError& e) {
  throw UserError("cannot read Gavel throughputs '" + path + "': " + e.what());
}

std::optional<std::size_t> GavelTableModel::gpu_type_index(std::string_view gpu_type) const {
  for (std::size_t i = 0; i < gpu_types_.size(); ++i)
    if (equal_ignoring_case(gpu_type, gpu_types_[i])) return i;
  return std::nullopt;
}

std::optional<std::size_t> GavelTableModel::job_type_index(const std::string& job_type) const {
  const auto found = job_type_indices_.find(job_type);
  if (found == job_type_indices_.end()) return std::nullopt;
  return found->second;
}

std::size_t GavelTableModel::curve_index(std::size_t gpu_type, bool spread, std::size_t job_type) const {
  return (gpu_type * 2 + (spread ? 1 : 0)) * job_types_.size() + job_type;
}

const GavelTableModel::ScalingCurve& GavelTableModel::curve(std::size_t gpu_type, bool spread,
                                                            std::size_t job_type) const {
  return curves_[curve_index(gpu_type, spread, job_type)];
}

double GavelTableModel::rate(const JobSpec& job, const Shape& shape) const {
  if (shape.gpus <= 0) return 0;
  const auto type = gpu_type_index(shape.gpu_type);
  const auto job_type = job_type_index(job.model);
  // check() and the workload's profile check rule these out before a run.
  if (!type || !job_type || curve(*type, false, *job_type).empty())
    throw UserError("throughput model 'gavel-table' has no throughput for '" + job.model + "' on GPU type '" +
                    shape.gpu_type + "'");
  const ScalingCurve& measured = curve(*type, shape.nodes > 1, *job_type);
  const Measurement* from = &measured.front();
  for (const Measurement& m : measured)
    if (m.gpus <= shape.gpus) from = &m;
  return from->steps_per_second * shape.gpus / from->gpus * (shape.gpu_milli / 1000.0);
}

bool GavelTableModel::profile_suits(std::string_view profile, int gpus) const {
  if (gpus <= 1) return true;
  const auto found = job_type_indices_.find(std::string(profile));
  return found != job_type_indices_.end() && distributed_[found->second];
}

std::string GavelTableModel::check(const ClusterState& cluster) const {
  std::string problems;
  auto report = [&](const std::string& problem) { problems += (problems.empty() ? "" : "; ") + problem; };
  for (const std::string& gpu_type : cluster.gpu_types()) {
    const auto type = gpu_type_index(gpu_type);
    if (!type) {
      std::string known;
      for (const std::string& t : gpu_types_) known += (known.empty() ? "" : ", ") + t;
      report("no throughputs for GPU type '" + gpu_type + "' (the table has: " + known + ")");
      continue;
    }
    std::string missing;
    for (std::size_t j = 0; j < job_types_.size(); ++j)
      if (curve(*type, false, j).empty()) missing += (missing.empty() ? "'" : ", '") + job_types_[j] + "'";
    if (!missing.empty()) report("GPU type '" + gpu_type + "' has no throughput for " + missing);
  }
  return problems;
}

std::optional<std::pair<double, double>> GavelTableModel::colocated_rates(const JobSpec& job, const JobSpec& partner,
                                                                          const Shape& shape) const {
  const auto type = gpu_type_index(shape.gpu_type);
  const auto job_type = job_type_index(job.model);
  const auto partner_type = job_type_index(partner.model);
  if (!type || !job_type || !partner_type) return std::nullopt;
  const auto found = colocated_.find({*type, *job_type, shape.gpus, *partner_type});
  if (found == colocated_.end() || found->second.first <= 0 || found->second.second <= 0) return std::nullopt;
  return found->second;
}

double GavelTableModel::rate_colocated(const JobSpec& job, std::span<const JobSpec* const> others,
                                       const Shape& shape) const {
  if (others.size() != 1)
    throw std::logic_error("gavel-table prices pairs, asked for a group of " + std::to_string(others.size() + 1));
  const JobSpec& partner = *others.front();
  const auto type = gpu_type_index(shape.gpu_type);
  const auto job_type = job_type_index(job.model);
  const auto partner_type = job_type_index(partner.model);
  if (type && job_type && partner_type) {
    if (const auto found = colocated_.find({*type, *job_type, shape.gpus, *partner_type}); found != colocated_.end())
      return found->second.first;
    // Listed under the partner's entry only: [partner's, job's].
    if (const auto found = colocated_.find({*type, *partner_type, shape.gpus, *job_type}); found != colocated_.end())
      return found->second.second;
  }
  const std::string gpus = std::to_string(shape.gpus) + " " + shape.gpu_type + " GPU" + (shape.gpus == 1 ? "" : "s");
  throw UserError(path_ + ": no co-location throughput for '" + job.model + "' beside '" + partner.model + "' on " +
                  gpus + " (under \"('" + job.model + "', " + std::to_string(shape.gpus) + ")\" the table needs an [own, partner] pair for \"('" +
                  partner.model + "', " + std::to_string(shape.gpus) + ")\")");
}

std::unique_ptr<ThroughputModel> parse_gavel_table_model(TableReader& arguments, const ModelSettings&) {
  const auto path = arguments.input_path("path", std::nullopt);
  const auto use_unconsolidated = arguments.boolean("unconsolidated", true);
  if (!path || !use_unconsolidated) return nullptr;
  try {
    return std::make_unique<GavelTableModel>(*path, *use_unconsolidated);
  } catch (const UserError& e) {
    arguments.error("path", e.what());
    return nullptr;
  }
}

}  // namespace tessel
