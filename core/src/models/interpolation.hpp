// Piecewise-linear lookup on ascending grids, shared by the table-driven
// throughput models. A query outside a grid is clamped to its nearest end:
// measured tables say nothing about what lies beyond them, so the models
// never extrapolate.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>

namespace tessel {

// Where a value falls on a grid: `weight` of the way from point `lower` to
// point `upper` (equal indices, weight 0, on or beyond a grid point).
struct GridPosition {
  std::size_t lower = 0;
  std::size_t upper = 0;
  double weight = 0;
};

// `grid` must be non-empty and strictly ascending.
inline GridPosition locate(std::span<const double> grid, double x) {
  if (x <= grid.front()) return {0, 0, 0};
  if (x >= grid.back()) return {grid.size() - 1, grid.size() - 1, 0};
  const auto upper = static_cast<std::size_t>(std::upper_bound(grid.begin(), grid.end(), x) - grid.begin());
  const std::size_t lower = upper - 1;
  if (grid[lower] == x) return {lower, lower, 0};
  return {lower, upper, (x - grid[lower]) / (grid[upper] - grid[lower])};
}

inline double lerp(double from, double to, double weight) { return from + (to - from) * weight; }

}  // namespace tessel
