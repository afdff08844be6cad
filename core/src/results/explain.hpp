// `tessel explain`: why a job waited. The job's life in one line, then every
// decision recorded about it, in time order, with its stage, plugin and
// reason (recorded only with `[output] decisions = true`).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>

#include "results/store.hpp"

namespace tessel {

// Which of a job's decisions to show: those in [from, to] seconds of the
// run, of one stage; everything by default.
struct ExplainFilter {
  std::optional<double> from, to;
  std::optional<PluginKind> stage;
};

// Throws UserError for an unknown run or job.
void print_explanation(std::ostream& out, ResultsStore& store, std::int64_t run, JobId job,
                       const ExplainFilter& filter = {});

}  // namespace tessel
