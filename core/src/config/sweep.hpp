// [sweep]: one experiment, many runs. Each key is a config path (as for
// --set) and each value a list; the runs are the cross product of the
// lists, in the order the keys are written, the last key varying fastest.
// `seeds = [1, 2, 3]` repeats every point with workload.seed set to each.
// A table instead of a list names its values, in the order written; names
// label the runs (and --resume matches points by them):
//   - under a config path, each named value is that path's value: a whole
//     table swept under a short label (a plugin with its own arguments);
//   - under a plain name, each named variant sets several config paths at
//     once (a policy that differs in allocation, placement and elasticity).
//
//   [sweep]
//   "workload.jobs_per_hour" = [2, 4, 6]
//   "scheduler.allocation.plugin" = ["fifo", "las"]
//   "scheduler.placement" = { packed = { plugin = "consolidated" }, spread = { plugin = "spread" } }
//   seeds = [1, 2]
//
//   [sweep.policy.tiresias]            # axis "policy", variant "tiresias"
//   "scheduler.allocation" = { plugin = "tiresias" }
//   "scheduler.placement" = { plugin = "consolidated" }
#pragma once

#include <string>
#include <vector>

#include "config/toml_document.hpp"

namespace tessel {

struct SweepPoint {
  std::vector<std::string> overrides;  // "path=value", applied like --set
  std::string axes;                    // the point's values as a JSON object, e.g. {"seed":1,...}
  // What the sweep's names stand for ("policy.tiresias: scheduler.allocation=..."),
  // the same for every point: a run labelled by a name is only the run of
  // that name while the name means the same.
  std::string named_values;
};

// The points of the document's [sweep], or one point with no overrides when
// there is none. Throws ConfigError for a malformed [sweep].
std::vector<SweepPoint> expand_sweep(const TomlDocument& document);

// The document without its [sweep] table, as TOML text.
std::string without_sweep(const TomlDocument& document);

// A hash of the configuration a run ran, leaving out what its sweep point
// sets (`point.overrides`) and [output], which says where results go, not
// what they are, but keeping what the sweep's names stand for. The runs of
// one sweep share it; a run of the same point under another configuration,
// or under a name that now means something else, does not.
std::string configuration_fingerprint(const TomlDocument& document, const SweepPoint& point = {});

// The config paths ("workload.jobs") whose values differ between two
// effective configurations (the runs table's `config`), [output] aside.
std::vector<std::string> differing_keys(const std::string& config_a, const std::string& config_b);

}  // namespace tessel
