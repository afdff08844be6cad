// The simulated clock's end, for every reader that can find a time past it:
// the configuration (a round's length), the workload (a trace's arrivals)
// and the simulation (what a run reaches).
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace tessel {

// Past it a double keeps less than a millisecond's resolution, and only a
// number no experiment means gets there (a round of 1e308 s, 1e-300 jobs an
// hour, an arrival in the wrong unit).
inline constexpr double kLastSimulatedSecond = 1e12;
inline constexpr const char* kLastSimulatedSecondText = "1e12 s (31,700 years)";

// " at t=2e+12 s, past the 1e12 s (31,700 years) a simulation runs".
inline std::string past_the_simulated_clock(double t) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", t);
  return " at t=" + std::string(text) + " s, past the " + kLastSimulatedSecondText + " a simulation runs";
}

// The same for job `id` (`name`: the trace's own identifier, if any), said
// as its workload is built or, for a stream's, as a run reaches it.
inline std::string arrival_past_the_simulated_clock(std::size_t id, const std::string& name, double arrival) {
  return "job " + std::to_string(id) + (name.empty() ? "" : " ('" + name + "')") + " would arrive" +
         past_the_simulated_clock(arrival) + ": see [workload]'s arrivals";
}

}  // namespace tessel
