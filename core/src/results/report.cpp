#include "results/report.hpp"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/errors.hpp"

namespace tessel {

std::vector<RunReport> load_reports(ResultsStore& store, const std::vector<std::int64_t>& run_ids) {
  std::vector<RunRow> runs;
  if (run_ids.empty()) {
    runs = store.runs();
  } else {
    for (std::int64_t id : run_ids) {
      auto row = store.run(id);
      if (!row) throw UserError(store.path() + ": no run " + std::to_string(id));
      runs.push_back(std::move(*row));
    }
  }
  std::vector<RunReport> reports;
  for (RunRow& run : runs) {
    RunSummary summary = summarize(store.jobs(run.id), run.capacity_gpu_seconds);
    reports.push_back({std::move(run), summary});
  }
  return reports;
}

namespace {

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

void print_table(std::ostream& out, const std::vector<RunReport>& reports) {
  // One unit for the whole table, so that rows compare at a glance.
  double largest = 0;
  for (const auto& r : reports) largest = std::max(largest, r.summary.avg_jct);
  const bool hours = largest >= 3 * 3600;
  const double scale = hours ? 3600 : 1;
  const int decimals = hours ? 2 : 0;
  const std::string unit = hours ? "h" : "s";

  const std::vector<std::string> header = {
      "run", "label", "status", "jobs", "finished", "avg JCT", "p50 JCT", "p95 JCT", "p99 JCT",
      "avg queueing", "makespan", "GPU util", "preemptions"};
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : reports) {
    const RunSummary& s = r.summary;
    rows.push_back({std::to_string(r.run.id), r.run.label.empty() ? "-" : r.run.label, r.run.status,
                    std::to_string(s.jobs), std::to_string(s.finished),
                    fixed(s.avg_jct / scale, decimals) + " " + unit,
                    fixed(s.p50_jct / scale, decimals) + " " + unit,
                    fixed(s.p95_jct / scale, decimals) + " " + unit,
                    fixed(s.p99_jct / scale, decimals) + " " + unit,
                    fixed(s.avg_queueing_delay / scale, decimals) + " " + unit,
                    fixed(s.makespan / scale, decimals) + " " + unit,
                    fixed(100 * s.gpu_utilization, 1) + " %", std::to_string(s.preemptions)});
  }
  std::vector<std::size_t> width(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    for (std::size_t c = 0; c < cells.size(); ++c) {
      // Text columns align left, figures right.
      if (c == 1 || c == 2)
        out << std::left << std::setw(static_cast<int>(width[c])) << cells[c];
      else
        out << std::right << std::setw(static_cast<int>(width[c])) << cells[c];
      out << (c + 1 < cells.size() ? "  " : "\n");
    }
  };
  line(header);
  for (const auto& row : rows) line(row);
  for (const auto& r : reports) {
    if (r.run.mode == "cluster" && r.run.status != "complete")
      // A cluster run keeps its rows up to date: its figures are real, so far.
      out << "note: run " << r.run.id << " is a cluster run, " << r.run.status << ": figures cover "
          << r.summary.finished << " finished of " << r.summary.jobs << " jobs so far"
          << (r.run.status == "interrupted" ? "; `tessel serve` on this database resumes it" : "") << "\n";
    else if (r.run.status != "complete")
      out << "note: run " << r.run.id << " is " << r.run.status
          << (r.run.note.empty() ? "" : " (" + r.run.note + ")") << "; it has no results\n";
    else if (!r.run.note.empty())
      out << "note: run " << r.run.id << ": " << r.run.note << "\n";
  }
}

void print_csv(std::ostream& out, const std::vector<RunReport>& reports) {
  out << "run,label,status,jobs,finished,avg_jct_s,p50_jct_s,p95_jct_s,p99_jct_s,"
         "avg_queueing_delay_s,makespan_s,gpu_utilization,preemptions\n";
  for (const auto& r : reports) {
    const RunSummary& s = r.summary;
    out << r.run.id << ',' << csv_field(r.run.label) << ',' << r.run.status << ',' << s.jobs << ','
        << s.finished << ',' << fixed(s.avg_jct, 3) << ',' << fixed(s.p50_jct, 3) << ','
        << fixed(s.p95_jct, 3) << ',' << fixed(s.p99_jct, 3) << ',' << fixed(s.avg_queueing_delay, 3)
        << ',' << fixed(s.makespan, 3) << ',' << fixed(s.gpu_utilization, 6) << ',' << s.preemptions
        << '\n';
  }
}

void print_json(std::ostream& out, const std::vector<RunReport>& reports) {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& r : reports) {
    const RunSummary& s = r.summary;
    nlohmann::json axes = nlohmann::json::parse(r.run.axes, nullptr, false);
    runs.push_back({{"run", r.run.id},
                    {"label", r.run.label},
                    {"axes", axes.is_discarded() ? nlohmann::json::object() : axes},
                    {"status", r.run.status},
                    {"seed", r.run.seed},
                    {"jobs", s.jobs},
                    {"finished", s.finished},
                    {"avg_jct_s", s.avg_jct},
                    {"p50_jct_s", s.p50_jct},
                    {"p95_jct_s", s.p95_jct},
                    {"p99_jct_s", s.p99_jct},
                    {"avg_queueing_delay_s", s.avg_queueing_delay},
                    {"makespan_s", s.makespan},
                    {"gpu_utilization", s.gpu_utilization},
                    {"preemptions", s.preemptions}});
  }
  out << runs.dump(2) << '\n';
}

}  // namespace

void print_report(std::ostream& out, const std::vector<RunReport>& reports, ReportFormat format) {
  switch (format) {
    case ReportFormat::table: print_table(out, reports); break;
    case ReportFormat::csv: print_csv(out, reports); break;
    case ReportFormat::json: print_json(out, reports); break;
  }
}

}  // namespace tessel
