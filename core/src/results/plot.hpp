// `tessel plot`: figures from a results database, drawn by gnuplot into SVG
// or PNG (by the output's extension), with labelled axes, units and a legend.
//   jct-cdf    the distribution of job completion times, one line per run
//   metric     one figure against a sweep axis, one line per series (policy)
//   occupancy  busy GPUs and waiting jobs over time, for one run
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "results/store.hpp"

namespace tessel {

struct PlotRequest {
  std::string kind = "jct-cdf";
  std::vector<std::int64_t> runs;  // empty: every complete run (occupancy: the last one)
  std::string metric = "avg_jct_s";  // for `metric`
  std::string axis;                  // for `metric`: the sweep axis on x
  std::vector<std::string> over;     // for `metric`: axes averaged over, like seeds
  std::string output;                // .svg or .png
};

std::vector<std::string> plot_kinds();

// Throws UserError for a bad request, missing gnuplot, or nothing to plot.
void plot(ResultsStore& store, const PlotRequest& request);

}  // namespace tessel
