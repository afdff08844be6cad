// Identifiers shared by the data model. They are dense indices the core hands
// out, so plugins may use them to index their own vectors.
#pragma once

#include <cstdint>
#include <limits>

namespace tessel {

using JobId = std::uint32_t;
using NodeId = std::uint32_t;
using GpuId = std::uint32_t;

inline constexpr JobId kNoJob = std::numeric_limits<JobId>::max();

}  // namespace tessel
