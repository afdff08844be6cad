// `tessel report`: the summary of each run in a results database, as a
// table for people, or CSV / JSON for tools. Times in CSV and JSON are
// seconds; the table picks seconds or hours and says which.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "results/store.hpp"
#include "results/summary.hpp"

namespace tessel {

enum class ReportFormat { table, csv, json };

struct RunReport {
  RunRow run;
  RunSummary summary;
};

// Every run, or only `run_ids` when given. Throws UserError for unknown ids.
std::vector<RunReport> load_reports(ResultsStore& store, const std::vector<std::int64_t>& run_ids = {});

void print_report(std::ostream& out, const std::vector<RunReport>& reports, ReportFormat format);

}  // namespace tessel
