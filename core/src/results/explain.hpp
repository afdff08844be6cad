// `tessel explain`: why a job waited. The job's life in one line, then every
// decision recorded about it, in time order, with its stage, plugin and
// reason (recorded only with `[output] decisions = true`).
#pragma once

#include <cstdint>
#include <ostream>

#include "results/store.hpp"

namespace tessel {

// Throws UserError for an unknown run or job.
void print_explanation(std::ostream& out, ResultsStore& store, std::int64_t run, JobId job);

}  // namespace tessel
