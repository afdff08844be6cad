// `tessel report` and `tessel compare`: the figures of the runs in a results
// database, as a table for people, or CSV / JSON for tools. Times in CSV and
// JSON are seconds; a table picks seconds or hours and says which.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "results/store.hpp"
#include "results/summary.hpp"

namespace tessel {

enum class ReportFormat { table, csv, json };

// How each run's jobs are reported: all together, or one group per VC
// (summarize_by_vc), each with the same figures.
enum class JobGrouping { none, vc };

struct RunReport {
  RunRow run;
  RunSummary summary;
  std::string group;  // with JobGrouping::vc: the VC ("" for jobs without one)
};

// Every run, or only `run_ids` when given; with JobGrouping::vc one report
// per run and VC (a run without jobs keeps one report, of group "").
// Throws UserError for unknown ids.
std::vector<RunReport> load_reports(ResultsStore& store, const std::vector<std::int64_t>& run_ids = {},
                                    JobGrouping grouping = JobGrouping::none);

// One row per report; with JobGrouping::vc, a `vc` column after the run's.
void print_report(std::ostream& out, const std::vector<RunReport>& reports, ReportFormat format,
                  JobGrouping grouping = JobGrouping::none);

// A sweep grouped by one axis: complete runs that differ only in `axis`, in
// their seed and in the `over` axes (replicates, such as the workload files
// of a published evaluation) form a series; each group is one value of the
// axis in one series, with the figures averaged over its runs. Reports split
// by VC are averaged VC by VC.
struct AxisGroup {
  std::string series;    // the label and the other axes
  nlohmann::json value;  // of `axis`
  std::size_t runs = 0;  // averaged over (one per seed and `over` value)
  RunSummary mean;
  std::string group;     // RunReport::group
  std::vector<std::int64_t> run_ids;  // the runs averaged, for spreads (error bars)
};
// Series in order of first appearance, values in order within a series,
// then groups in name order. Throws UserError if no complete run has the
// axis or one of `over`.
std::vector<AxisGroup> group_by_axis(const std::vector<RunReport>& reports, const std::string& axis,
                                     const std::vector<std::string>& over = {});
void print_grouped_report(std::ostream& out, const std::vector<AxisGroup>& groups, const std::string& axis,
                          ReportFormat format, JobGrouping grouping = JobGrouping::none);


// Two runs side by side, with the ratio B / A of each figure.
void print_comparison(std::ostream& out, const RunReport& a, const RunReport& b);

// "jobs_per_hour=2 plugin=las seed=1": a run's axes, each named by the last
// part of its path.
std::string axes_text(const std::string& axes_json);

}  // namespace tessel
