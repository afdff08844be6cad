// A linear program solved with GLPK's simplex method, for allocation plugins
// that optimise (gavel, synergy's `opt` mode). Not part of tessel.hpp: a
// plugin that includes it links GLPK too: pkg-config tessel-lp (Debian: libglpk-dev).
//
// The class owns its glp_prob, numbers rows and columns from 0, and keeps
// GLPK quiet: GLPK prints progress to the terminal unless told otherwise,
// and it aborts the process on invalid input, so every index and number is
// checked here before GLPK sees it. A solver failure (a singular basis
// twice, an iteration limit, ...) becomes SolverError naming the program;
// an infeasible or unbounded program is an answer, not an error.
//
// A program solved again after only its bounds changed (gavel's searches)
// resumes from its last basis with the dual simplex: a few pivots instead
// of a full solve.
#pragma once

#include <glpk.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessel::lp {

class SolverError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bounds of a row (the value of its linear form) or of a column.
struct Bounds {
  int kind = GLP_FR;
  double lower = 0;
  double upper = 0;

  static Bounds none() { return {GLP_FR, 0, 0}; }
  static Bounds at_least(double lower) { return {GLP_LO, lower, 0}; }
  static Bounds at_most(double upper) { return {GLP_UP, 0, upper}; }
  static Bounds exactly(double value) { return {GLP_FX, value, value}; }
  static Bounds between(double lower, double upper) {
    return lower == upper ? exactly(lower) : Bounds{GLP_DB, lower, upper};
  }
};

enum class Direction { maximize, minimize };
enum class Outcome { optimal, infeasible, unbounded };

class LinearProgram {
 public:
  LinearProgram(std::string name, Direction direction) : name_(std::move(name)), problem_(glp_create_prob()) {
    glp_set_obj_dir(problem_.get(), direction == Direction::maximize ? GLP_MAX : GLP_MIN);
    // GLPK reads triplets from index 1; slot 0 is a placeholder.
    row_of_.push_back(0);
    column_of_.push_back(0);
    coefficient_.push_back(0);
  }

  int rows() const { return glp_get_num_rows(problem_.get()); }
  int columns() const { return glp_get_num_cols(problem_.get()); }

  int add_column(Bounds bounds, double objective = 0) {
    check_finite(objective, "objective coefficient");
    const int column = glp_add_cols(problem_.get(), 1);
    set_column_bounds(column - 1, bounds);
    glp_set_obj_coef(problem_.get(), column, objective);
    return column - 1;
  }

  int add_row(Bounds bounds) {
    glp_add_rows(problem_.get(), 1);
    set_row_bounds(rows() - 1, bounds);
    return rows() - 1;
  }

  // Adds `coefficient` to the entry (row, column); entries given twice add up.
  void add_term(int row, int column, double coefficient) {
    check(row, rows(), "row");
    check(column, columns(), "column");
    check_finite(coefficient, "coefficient");
    if (coefficient == 0) return;
    row_of_.push_back(row + 1);
    column_of_.push_back(column + 1);
    coefficient_.push_back(coefficient);
    matrix_loaded_ = false;
  }

  void set_row_bounds(int row, Bounds bounds) {
    check(row, rows(), "row");
    check_finite(bounds);
    glp_set_row_bnds(problem_.get(), row + 1, bounds.kind, bounds.lower, bounds.upper);
  }

  void set_column_bounds(int column, Bounds bounds) {
    check(column, columns(), "column");
    check_finite(bounds);
    glp_set_col_bnds(problem_.get(), column + 1, bounds.kind, bounds.lower, bounds.upper);
  }

  // A crash start: `column` enters the basis in place of `row`'s slack, so
  // that the first solve starts with the row tight (at its lower bound) and
  // the column at the value that makes it so. Call before the first solve.
  void start_with_basic(int column, int row) {
    check(column, columns(), "column");
    check(row, rows(), "row");
    glp_set_col_stat(problem_.get(), column + 1, GLP_BS);
    glp_set_row_stat(problem_.get(), row + 1, GLP_NL);
  }

  Outcome solve() {
    const int previous_output = glp_term_out(GLP_OFF);
    load_matrix();
    glp_smcp parameters;
    glp_init_smcp(&parameters);
    parameters.msg_lev = GLP_MSG_OFF;
    // After a first solve only bounds change: the old basis stays dual
    // feasible, so the dual simplex resumes from it.
    parameters.meth = solved_before_ ? GLP_DUALP : GLP_PRIMAL;
    int code = glp_simplex(problem_.get(), &parameters);
    if (code == GLP_EBADB || code == GLP_ESING || code == GLP_ECOND) {
      // A basis GLPK cannot factorise: start again from the slack basis.
      glp_std_basis(problem_.get());
      parameters.meth = GLP_PRIMAL;
      code = glp_simplex(problem_.get(), &parameters);
    }
    glp_term_out(previous_output);
    if (code != 0) throw SolverError(name_ + ": GLPK's simplex failed: " + describe_failure(code));
    solved_before_ = true;
    switch (glp_get_status(problem_.get())) {
      case GLP_OPT:
        return Outcome::optimal;
      case GLP_NOFEAS:
        return Outcome::infeasible;
      case GLP_UNBND:
        return Outcome::unbounded;
      default:
        throw SolverError(name_ + ": GLPK's simplex stopped without an optimal solution");
    }
  }

  double value(int column) const {
    check(column, columns(), "column");
    return glp_get_col_prim(problem_.get(), column + 1);
  }
  double objective() const { return glp_get_obj_val(problem_.get()); }

 private:
  struct Deleter {
    void operator()(glp_prob* problem) const { glp_delete_prob(problem); }
  };

  void check(int index, int count, const char* what) const {
    if (index < 0 || index >= count)
      throw std::out_of_range(name_ + ": " + what + " " + std::to_string(index) + " does not exist (" +
                              std::to_string(count) + " defined)");
  }

  void check_finite(double value, const char* what) const {
    if (!std::isfinite(value)) throw SolverError(name_ + ": a " + what + " is not a finite number");
  }
  void check_finite(Bounds bounds) const {
    if (bounds.kind == GLP_LO || bounds.kind == GLP_DB || bounds.kind == GLP_FX) check_finite(bounds.lower, "bound");
    if (bounds.kind == GLP_UP || bounds.kind == GLP_DB) check_finite(bounds.upper, "bound");
  }

  // GLPK refuses duplicate entries, so equal (row, column) pairs are summed first.
  void load_matrix() {
    if (matrix_loaded_) return;
    std::vector<int> order(row_of_.size() - 1);
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i) + 1;
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      return row_of_[a] != row_of_[b] ? row_of_[a] < row_of_[b] : column_of_[a] < column_of_[b];
    });
    std::vector<int> rows{0}, columns{0};
    std::vector<double> coefficients{0};
    for (int i : order) {
      if (rows.size() > 1 && rows.back() == row_of_[i] && columns.back() == column_of_[i]) {
        coefficients.back() += coefficient_[i];
      } else {
        rows.push_back(row_of_[i]);
        columns.push_back(column_of_[i]);
        coefficients.push_back(coefficient_[i]);
      }
    }
    glp_load_matrix(problem_.get(), static_cast<int>(rows.size()) - 1, rows.data(), columns.data(),
                    coefficients.data());
    // Rows and columns of very different magnitudes (steps/s next to GPU
    // counts) slow the simplex and cost accuracy; GLPK rescales them.
    glp_scale_prob(problem_.get(), GLP_SF_AUTO);
    matrix_loaded_ = true;
  }

  static std::string describe_failure(int code) {
    switch (code) {
      case GLP_EBADB: return "the initial basis is invalid";
      case GLP_ESING: return "the basis matrix is singular";
      case GLP_ECOND: return "the basis matrix is ill-conditioned";
      case GLP_EBOUND: return "a variable has invalid bounds";
      case GLP_EFAIL: return "the solver failed numerically";
      case GLP_EITLIM: return "the iteration limit was reached";
      case GLP_ETMLIM: return "the time limit was reached";
      default: return "error code " + std::to_string(code);
    }
  }

  std::string name_;
  std::unique_ptr<glp_prob, Deleter> problem_;
  std::vector<int> row_of_, column_of_;
  std::vector<double> coefficient_;
  bool matrix_loaded_ = false;
  bool solved_before_ = false;
};

}  // namespace tessel::lp
