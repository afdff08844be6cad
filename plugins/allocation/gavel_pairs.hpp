// Space sharing in gavel's LP, by classes of jobs: what keeps the `_packed`
// policies tractable at hundreds of jobs.
//
// Gavel's PolicyWithPacking (stanford-futuredata/gavel, scheduler/policies/
// policy.py) gives every pair of jobs j, k its own time share X[jk][t] on
// each GPU type t: O(n^2) variables, about 360,000 for the 490 single-GPU
// jobs of 700 of Gavel's generator. But a pair's rates depend only on the
// two jobs' classes (a class: jobs the throughput model prices alike, alone
// and beside any partner; in Gavel, a job type and scale factor). So the LP
// here has, for each job j of class A, each class B it may pair with and
// each type t, one variable Y[j][B][t]: the time j spends beside any job
// of B on t. The rows of X are kept, written with Y:
//   j's time:        sum_t X[j][t] + sum_{B,t} Y[j][B][t] <= 1
//   j's throughput:  sum_t X[j][t] r_j[t] + sum_{B,t} Y[j][B][t] r_A(B)[t]
//   type t's GPUs:   sum_j g_j X[j][t] + sum_{j,B} (g/2) Y[j][B][t] <= N_t
//                    (a pair's time is in both jobs' Y: counted half each)
// and two kinds of row say that the Y come from some X:
//   A != B:  sum_{j in A} Y[j][B][t] = sum_{k in B} Y[k][A][t]
//            (A's time beside B is B's time beside A)
//   A == B:  Y[j][A][t] <= sum_{k in A, k != j} Y[k][A][t]
//            (j's time beside its own class is spent with the others),
//            written with one column S[A][t] = sum_{k in A} Y[k][A][t] as
//            Y[j][A][t] <= S[A][t] / 2, so that a class of m jobs costs O(m)
//            entries, not O(m^2).
// The two programs have the same feasible (throughput, time, GPUs) of every
// job, hence the same optimum for every policy, whose objective and targets
// read only these:
// - X gives Y = sum_{k in B} X[jk][t]; every row above holds (for A == B:
//   X[jk] is one term of Y[k][A], so sum_{k != j} X[jk] <= sum_{k != j} Y[k][A]).
// - Y gives X (shares(), below), with the same per-job sums:
//   A != B: a transportation problem, supplies Y[j][B] over A, demands
//   Y[k][A] over B, equal totals: the north-west corner rule fills it with
//   at most |A| + |B| - 1 pairs.
//   A == B: a symmetric X with zero diagonal and row sums d_j = Y[j][A]
//   exists when no d_j exceeds half their sum S, which the rows ask. Lay
//   the d_j end to end on a circle of length S and pair each point with the
//   point opposite (S/2 further on): X[jk] is the length of j's arc whose
//   opposite lies in k's arc. Opposition is symmetric, so X[jk] = X[kj];
//   an arc no longer than S/2 never faces itself; j's arc is covered once,
//   so sum_k X[jk] = d_j; at most 2m arcs' pieces, so at most 2m pairs.
// Gavel wrote the same aggregation for max_min_fairness_packed alone
// (policies/max_min_fairness.py, get_allocation_using_job_type_throughputs,
// used by its solver-scaling script, not its simulator); it asks instead
// that every Y[j][A] of a class be equal, a restriction that can lower the
// optimum, and splits pairs in proportion, which pairs every job with every
// other.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <utility>
#include <vector>

#include <tessel/lp.hpp>

namespace tessel_plugins {

// Jobs (indices into a program's jobs) grouped into classes, and the
// classes that may share GPUs, with their rates there.
struct PairClasses {
  struct Pairing {
    std::size_t a, b;  // classes, a <= b
    int gpus;          // GPUs each job holds, shared by both
    std::vector<double> a_rate, b_rate;  // by type: a job of a's rate beside one of b's, and the reverse; 0: cannot
  };
  std::vector<std::vector<std::size_t>> members;  // each class's jobs, ascending
  std::vector<Pairing> pairings;

  // Whether `pairing` may run on type t: both rates positive, and two jobs
  // to pair within a class.
  bool runs(const Pairing& pairing, std::size_t t) const {
    return pairing.a_rate[t] > 0 && pairing.b_rate[t] > 0 && (pairing.a != pairing.b || members[pairing.a].size() >= 2);
  }
};

// Two jobs' time shares side by side, by type; first < second.
struct JobPairShares {
  std::size_t first, second;
  std::vector<double> share;
};

// The Y columns of PairClasses in a program whose per-job and per-type rows
// already exist, and the X[jk] they stand for once it is solved.
class PairColumns {
 public:
  // `time_row[j]`, `target_row[j]`: job j's time and throughput rows;
  // `type_row[t]`: type t's GPUs; `scale[j]`: the unit of j's throughput row
  // per unit of rate; `type_weight[t]`, if given: the objective's
  // coefficient per unit of rate on type t (none if empty).
  PairColumns(tessel::lp::LinearProgram& program, const PairClasses& classes, const std::vector<int>& time_row,
              const std::vector<int>& target_row, const std::vector<int>& type_row, const std::vector<double>& scale,
              const std::vector<double>& type_weight = {})
      : classes_(classes), types_(type_row.size()) {
    for (std::size_t p = 0; p < classes.pairings.size(); ++p) {
      const PairClasses::Pairing& pairing = classes.pairings[p];
      for (std::size_t t = 0; t < types_; ++t) {
        if (!classes.runs(pairing, t)) continue;
        Block block{p, t, {}, {}};
        auto add = [&](std::size_t job, double rate) {
          const int y = program.add_column(tessel::lp::Bounds::between(0, 1),
                                           type_weight.empty() ? 0.0 : rate * type_weight[t]);
          program.add_term(time_row[job], y, 1);
          program.add_term(target_row[job], y, rate * scale[job]);
          program.add_term(type_row[t], y, pairing.gpus / 2.0);
          return y;
        };
        for (std::size_t job : classes.members[pairing.a]) block.a_columns.push_back(add(job, pairing.a_rate[t]));
        if (pairing.a != pairing.b) {
          for (std::size_t job : classes.members[pairing.b]) block.b_columns.push_back(add(job, pairing.b_rate[t]));
          const int balance = program.add_row(tessel::lp::Bounds::exactly(0));
          for (int y : block.a_columns) program.add_term(balance, y, 1);
          for (int y : block.b_columns) program.add_term(balance, y, -1);
        } else {
          const int sum = program.add_column(tessel::lp::Bounds::at_least(0));
          const int sum_row = program.add_row(tessel::lp::Bounds::exactly(0));
          program.add_term(sum_row, sum, 1);
          for (int y : block.a_columns) {
            program.add_term(sum_row, y, -1);
            const int half = program.add_row(tessel::lp::Bounds::at_most(0));
            program.add_term(half, y, 1);
            program.add_term(half, sum, -0.5);
          }
        }
        blocks_.push_back(std::move(block));
      }
    }
  }

  // The pairs' X of the program's current solution, pairs with no time left
  // out, each share rounded to `grain` (the solver's noise below it).
  std::vector<JobPairShares> shares(const tessel::lp::LinearProgram& program, double grain = 1e-6) const {
    std::map<std::pair<std::size_t, std::size_t>, std::vector<double>> by_pair;
    auto give = [&](std::size_t j, std::size_t k, std::size_t t, double time) {
      if (j == k || !(time > 0)) return;
      std::vector<double>& share = by_pair[{std::min(j, k), std::max(j, k)}];
      share.resize(types_, 0.0);
      share[t] += time;
    };
    auto values = [&](const std::vector<int>& columns) {
      std::vector<double> y(columns.size());
      for (std::size_t i = 0; i < columns.size(); ++i) y[i] = std::max(0.0, program.value(columns[i]));
      return y;
    };
    for (const Block& block : blocks_) {
      const PairClasses::Pairing& pairing = classes_.pairings[block.pairing];
      const std::vector<std::size_t>& a = classes_.members[pairing.a];
      const std::vector<double> ya = values(block.a_columns);
      if (pairing.a != pairing.b) {
        const std::vector<std::size_t>& b = classes_.members[pairing.b];
        north_west_corner(ya, values(block.b_columns),
                          [&](std::size_t i, std::size_t k, double time) { give(a[i], b[k], block.type, time); });
      } else {
        facing_arcs(ya, [&](std::size_t i, std::size_t k, double time) { give(a[i], a[k], block.type, time); });
      }
    }
    std::vector<JobPairShares> result;
    for (auto& [pair, share] : by_pair) {
      bool any = false;
      for (double& x : share) any = (x = std::clamp(std::round(x / grain) * grain, 0.0, 1.0)) > 0 || any;
      if (any) result.push_back({pair.first, pair.second, std::move(share)});
    }
    return result;
  }

  // Fills a transportation problem of equal totals (up to the solver's
  // noise) in order: `give(i, k, amount)` for at most |supply| + |demand| - 1
  // positive amounts whose sums are supply[i] and demand[k].
  template <class Give>
  static void north_west_corner(std::vector<double> supply, std::vector<double> demand, Give give) {
    std::size_t i = 0, k = 0;
    while (i < supply.size() && k < demand.size()) {
      const double amount = std::min(supply[i], demand[k]);
      if (amount > 0) give(i, k, amount);
      supply[i] -= amount;
      demand[k] -= amount;
      if (supply[i] <= demand[k]) ++i;
      else ++k;
    }
  }

  // A symmetric split of each d[i] among the others (none larger than half
  // the sum, up to noise): `give(i, k, amount)` once for each piece of i's arc
  // facing k's, and once for the same piece seen from k, each with half of
  // its length, so that each unordered pair receives X[ik] in all and
  // i's pieces add up to d[i].
  template <class Give>
  static void facing_arcs(const std::vector<double>& d, Give give) {
    std::vector<double> start(d.size() + 1, 0.0);
    for (std::size_t i = 0; i < d.size(); ++i) start[i + 1] = start[i] + d[i];
    const double total = start.back();
    if (!(total > 0)) return;
    const double half = total / 2;
    std::vector<double> cuts(start.begin(), start.end() - 1);
    for (std::size_t i = 0; i < d.size(); ++i) cuts.push_back(std::fmod(start[i] + half, total));
    cuts.push_back(total);
    std::sort(cuts.begin(), cuts.end());
    auto arc_at = [&](double x) {
      return static_cast<std::size_t>(std::upper_bound(start.begin(), start.end() - 1, x) - start.begin()) - 1;
    };
    for (std::size_t c = 0; c + 1 < cuts.size(); ++c) {
      const double length = cuts[c + 1] - cuts[c];
      if (!(length > 0)) continue;
      const double middle = (cuts[c] + cuts[c + 1]) / 2;
      const double opposite = middle >= half ? middle - half : middle + half;
      give(arc_at(middle), arc_at(opposite), length / 2);
    }
  }

 private:
  struct Block {  // one pairing on one type
    std::size_t pairing, type;
    std::vector<int> a_columns, b_columns;  // Y of a's members beside b, and of b's beside a (a != b)
  };

  const PairClasses& classes_;
  std::size_t types_;
  std::vector<Block> blocks_;
};

}  // namespace tessel_plugins
