// [sweep]: one experiment, many runs. Each key is a config path (as for
// --set) and each value a list; the runs are the cross product of the
// lists, in the order the keys are written, the last key varying fastest.
// `seeds = [1, 2, 3]` repeats every point with workload.seed set to each.
// An axis may instead be a table of named values, in the order written: each
// value is applied as a list's would be, and its name labels the runs. This
// sweeps whole tables whose keys differ (a plugin with its own arguments)
// under short labels; --resume then matches points by those names.
//
//   [sweep]
//   "workload.jobs_per_hour" = [2, 4, 6]
//   "scheduler.allocation.plugin" = ["fifo", "las"]
//   "scheduler.placement" = { packed = { plugin = "consolidated" }, spread = { plugin = "spread" } }
//   seeds = [1, 2]
#pragma once

#include <string>
#include <vector>

#include "config/toml_document.hpp"

namespace tessel {

struct SweepPoint {
  std::vector<std::string> overrides;  // "path=value", applied like --set
  std::string axes;                    // the point's values as a JSON object, e.g. {"seed":1,...}
};

// The points of the document's [sweep], or one point with no overrides when
// there is none. Throws ConfigError for a malformed [sweep].
std::vector<SweepPoint> expand_sweep(const TomlDocument& document);

// The document without its [sweep] table, as TOML text.
std::string without_sweep(const TomlDocument& document);

}  // namespace tessel
