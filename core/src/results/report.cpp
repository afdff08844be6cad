#include "results/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <map>
#include <string_view>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "config/sweep.hpp"
#include "engine/errors.hpp"

namespace tessel {

std::vector<RunReport> load_reports(ResultsStore& store, const std::vector<std::int64_t>& run_ids,
                                    JobGrouping grouping) {
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
    // A run's figures are the ones it stored when it completed; a run still
    // going (a real-node run, whose stored figures trail its rows by a few
    // seconds) has its figures so far computed from its rows.
    if (grouping == JobGrouping::none && run.status == "complete")
      if (std::optional<RunSummary> stored = store.figures(run.id)) {
        reports.push_back({std::move(run), *stored, {}});
        continue;
      }
    const std::vector<JobRecord> jobs = store.jobs(run.id);
    if (grouping == JobGrouping::none || jobs.empty()) {
      reports.push_back(
          {std::move(run), summarize(jobs, run.capacity_gpu_seconds, run.cluster_gpus, run.end_time), {}});
      continue;
    }
    for (GroupSummary& vc : summarize_by_vc(jobs, run.capacity_gpu_seconds, run.cluster_gpus, run.end_time))
      reports.push_back({run, vc.summary, std::move(vc.group)});
  }
  return reports;
}

std::string axes_text(const std::string& axes_json) {
  const nlohmann::ordered_json axes = nlohmann::ordered_json::parse(axes_json, nullptr, false);
  if (!axes.is_object()) return {};
  std::string text;
  for (const auto& [path, value] : axes.items()) {
    const std::string name = path.substr(path.rfind('.') + 1);
    text += (text.empty() ? "" : " ") + name + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
  }
  return text;
}

namespace {

// Rows of figures under some identifying columns: the one shape every
// report prints.
struct Row {
  std::vector<std::string> keys;
  RunSummary summary;
  bool has_figures = true;  // false: a run that stopped before its results (shown as "-", not zeros)
};

// A simulated run has figures once complete; a real-node run keeps its rows
// up to date, so its figures so far are real whatever its status.
bool has_figures(const RunRow& run) { return run.status == "complete" || run.mode == "cluster"; }

// Counts print whole, times to the millisecond, fractions to 6 places.
std::string machine_value(const Figure& figure, const RunSummary& s) {
  if (std::isnan(figure.get(s))) return "";  // a figure over no jobs
  char buffer[64];
  const int decimals = figure.unit == FigureUnit::count ? 0 : figure.unit == FigureUnit::seconds ? 3 : 6;
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, figure.get(s));
  return buffer;
}

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

// A group's name in a key column; jobs without a VC show as "-", as runs without a label do.
std::string group_text(const std::string& group) { return group.empty() ? "-" : group; }

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

// One unit for the whole table, so that rows compare at a glance.
struct TimeUnit {
  double scale;
  int decimals;
  const char* suffix;
};
TimeUnit unit_for(const std::vector<Row>& rows) {
  double largest = 0;
  for (const Row& row : rows) largest = std::max(largest, row.summary.avg_jct);
  return largest >= 3 * 3600 ? TimeUnit{3600, 2, " h"} : TimeUnit{1, 0, " s"};
}

std::string table_cell(const Figure& figure, const RunSummary& s, const TimeUnit& unit) {
  const double v = figure.get(s);
  if (std::isnan(v)) return "-";  // a figure over no jobs
  switch (figure.unit) {
    case FigureUnit::seconds: return fixed(v / unit.scale, unit.decimals) + unit.suffix;
    case FigureUnit::fraction: return fixed(100 * v, 1) + " %";
    case FigureUnit::count: return fixed(v, 0);
  }
  return {};
}

// `text_keys[k]`: key column k holds words (aligned left) rather than numbers.
void print_table(std::ostream& out, const std::vector<std::string>& key_names, const std::vector<bool>& text_keys,
                 const std::vector<Row>& rows) {
  const TimeUnit unit = unit_for(rows);
  std::vector<const Figure*> shown;
  for (const Figure& f : figures())
    if (!f.rare || std::any_of(rows.begin(), rows.end(), [&](const Row& row) { return f.get(row.summary) != 0; }))
      shown.push_back(&f);
  std::vector<std::string> header = key_names;
  for (const Figure* f : shown) header.emplace_back(f->title);
  std::vector<std::vector<std::string>> cells;
  for (const Row& row : rows) {
    std::vector<std::string> line = row.keys;
    for (const Figure* f : shown) line.push_back(row.has_figures ? table_cell(*f, row.summary, unit) : "-");
    cells.push_back(std::move(line));
  }
  std::vector<std::size_t> width(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& line : cells) width[c] = std::max(width[c], line[c].size());
  }
  auto print_line = [&](const std::vector<std::string>& line) {
    for (std::size_t c = 0; c < line.size(); ++c) {
      out << (c < text_keys.size() && text_keys[c] ? std::left : std::right) << std::setw(static_cast<int>(width[c]))
          << line[c] << (c + 1 < line.size() ? "  " : "\n");
    }
  };
  print_line(header);
  for (const auto& line : cells) print_line(line);
}

void print_csv(std::ostream& out, const std::vector<std::string>& key_names, const std::vector<Row>& rows) {
  for (std::size_t k = 0; k < key_names.size(); ++k) out << (k ? "," : "") << key_names[k];
  for (const Figure& f : figures()) out << ',' << f.name;
  out << '\n';
  for (const Row& row : rows) {
    for (std::size_t k = 0; k < row.keys.size(); ++k) out << (k ? "," : "") << csv_field(row.keys[k]);
    for (const Figure& f : figures()) out << ',' << (row.has_figures ? machine_value(f, row.summary) : "");
    out << '\n';
  }
}

nlohmann::json figures_json(const RunSummary& s) {
  nlohmann::json json = nlohmann::json::object();
  for (const Figure& f : figures()) {
    if (f.unit == FigureUnit::count)
      json[f.name] = std::llround(f.get(s));  // counts are integers
    else
      json[f.name] = f.get(s);
  }
  return json;
}

void print_rows(std::ostream& out, const std::vector<std::string>& key_names, const std::vector<bool>& text_keys,
                const std::vector<Row>& rows, ReportFormat format) {
  switch (format) {
    case ReportFormat::table: print_table(out, key_names, text_keys, rows); break;
    case ReportFormat::csv: print_csv(out, key_names, rows); break;
    case ReportFormat::json: {
      nlohmann::json list = nlohmann::json::array();
      for (const Row& row : rows) {
        nlohmann::json item = figures_json(row.summary);
        for (std::size_t k = 0; k < key_names.size(); ++k) item[key_names[k]] = row.keys[k];
        list.push_back(std::move(item));
      }
      out << list.dump(2) << '\n';
      break;
    }
  }
}

}  // namespace

void print_report(std::ostream& out, const std::vector<RunReport>& reports, ReportFormat format,
                  JobGrouping grouping) {
  const bool any_axes = std::any_of(reports.begin(), reports.end(),
                                    [](const RunReport& r) { return !axes_text(r.run.axes).empty(); });
  const bool by_vc = grouping == JobGrouping::vc;
  std::vector<std::string> keys = {"run", "label", "status"};
  if (any_axes) keys.insert(keys.begin() + 2, "axes");
  if (by_vc) keys.push_back("vc");
  std::vector<Row> rows;
  for (const RunReport& r : reports) {
    Row row{{std::to_string(r.run.id), r.run.label.empty() ? "-" : r.run.label, r.run.status}, r.summary,
            has_figures(r.run)};
    if (any_axes) row.keys.insert(row.keys.begin() + 2, axes_text(r.run.axes));
    if (by_vc) row.keys.push_back(group_text(r.group));
    rows.push_back(std::move(row));
  }
  if (format == ReportFormat::json) {
    // JSON keeps the axes as an object and adds what a tool may want.
    nlohmann::json list = nlohmann::json::array();
    for (const RunReport& r : reports) {
      nlohmann::json item = figures_json(r.summary);
      if (!has_figures(r.run))
        for (auto& [name, value] : item.items()) value = nullptr;
      nlohmann::json axes = nlohmann::json::parse(r.run.axes, nullptr, false);
      item["run"] = r.run.id;
      item["label"] = r.run.label;
      item["axes"] = axes.is_discarded() ? nlohmann::json::object() : axes;
      item["status"] = r.run.status;
      item["seed"] = r.run.seed;
      item["note"] = r.run.note;
      if (by_vc) item["vc"] = r.group;
      list.push_back(std::move(item));
    }
    out << list.dump(2) << '\n';
    return;
  }
  std::vector<bool> text_keys(keys.size(), true);
  text_keys[0] = false;  // the run id
  print_rows(out, keys, text_keys, rows, format);
  if (format != ReportFormat::table) return;
  std::int64_t noted = -1;  // a run split by VC has several reports in a row, and one note
  for (const RunReport& r : reports) {
    if (r.run.id == noted) continue;
    noted = r.run.id;
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

std::vector<AxisGroup> group_by_axis(const std::vector<RunReport>& reports, const std::string& axis,
                                     const std::vector<std::string>& over) {
  std::vector<AxisGroup> groups;
  std::vector<std::vector<RunSummary>> members;
  std::vector<const RunRow*> first_run;  // by group
  std::vector<std::string> known_axes;
  for (const RunReport& r : reports) {
    if (r.run.status != "complete") continue;
    nlohmann::ordered_json axes = nlohmann::ordered_json::parse(r.run.axes, nullptr, false);  // in sweep order
    if (!axes.is_object()) continue;
    for (const auto& [name, value] : axes.items())
      if (std::find(known_axes.begin(), known_axes.end(), name) == known_axes.end()) known_axes.push_back(name);
    if (!axes.contains(axis)) continue;
    const nlohmann::json value = nlohmann::json::parse(axes[axis].dump());
    axes.erase(axis);
    axes.erase("seed");
    for (const std::string& replicate : over) axes.erase(replicate);
    const std::string series = r.run.label + (axes.empty() ? "" : " " + axes_text(axes.dump()));
    auto group = std::find_if(groups.begin(), groups.end(), [&](const AxisGroup& g) {
      return g.series == series && g.value == value && g.group == r.group;
    });
    if (group == groups.end()) {
      groups.push_back({series, value, 0, {}, r.group, {}});
      members.emplace_back();
      first_run.push_back(&r.run);
      group = groups.end() - 1;
    }
    // Seeds and `over` values are averaged; runs of another configuration never are.
    if (const RunRow& first = *first_run[group - groups.begin()]; first.fingerprint != r.run.fingerprint) {
      std::string keys;
      for (const std::string& key : differing_keys(first.config, r.run.config))
        if (key != "workload.seed" && std::find(over.begin(), over.end(), key) == over.end())
          keys += (keys.empty() ? "" : ", ") + key;
      throw UserError("runs " + std::to_string(first.id) + " and " + std::to_string(r.run.id) + " are both " +
                      series + " at " + axis + "=" + value.dump() + " but ran different configurations (" +
                      (keys.empty() ? std::string("their fingerprints differ") : "they differ in " + keys) +
                      "); choose the runs to average with --run");
    }
    members[group - groups.begin()].push_back(r.summary);
    group->run_ids.push_back(r.run.id);
  }
  std::string valid;
  for (const auto& name : known_axes) valid += (valid.empty() ? "" : ", ") + name;
  if (groups.empty())
    throw UserError("no complete run has axis '" + axis + "' (axes: " + (valid.empty() ? "none" : valid) + ")");
  for (const std::string& replicate : over)
    if (std::find(known_axes.begin(), known_axes.end(), replicate) == known_axes.end())
      throw UserError("no complete run has axis '" + replicate + "' to average over (axes: " + valid + ")");
  for (std::size_t g = 0; g < groups.size(); ++g) {
    groups[g].mean = average(members[g]);
    groups[g].runs = members[g].size();
  }
  std::vector<std::string> series_order;
  for (const AxisGroup& g : groups)
    if (std::find(series_order.begin(), series_order.end(), g.series) == series_order.end())
      series_order.push_back(g.series);
  std::stable_sort(groups.begin(), groups.end(), [&](const AxisGroup& a, const AxisGroup& b) {
    const auto sa = std::find(series_order.begin(), series_order.end(), a.series);
    const auto sb = std::find(series_order.begin(), series_order.end(), b.series);
    if (sa != sb) return sa < sb;
    if (a.value != b.value) return a.value < b.value;
    return a.group < b.group;
  });
  return groups;
}

void print_grouped_report(std::ostream& out, const std::vector<AxisGroup>& groups, const std::string& axis,
                          ReportFormat format, JobGrouping grouping) {
  const bool by_vc = grouping == JobGrouping::vc;
  if (format == ReportFormat::json) {
    // JSON keeps the axis value's type and adds the runs averaged.
    nlohmann::json list = nlohmann::json::array();
    for (const AxisGroup& g : groups) {
      nlohmann::json item = figures_json(g.mean);
      item["series"] = g.series;
      item[axis] = g.value;
      if (by_vc) item["vc"] = g.group;
      item["runs"] = g.runs;
      item["run_ids"] = g.run_ids;
      list.push_back(std::move(item));
    }
    out << list.dump(2) << '\n';
    return;
  }
  std::vector<Row> rows;
  for (const AxisGroup& g : groups) {
    Row row{{g.series, g.value.is_string() ? g.value.get<std::string>() : g.value.dump()}, g.mean};
    if (by_vc) row.keys.push_back(group_text(g.group));
    row.keys.push_back(std::to_string(g.runs));
    rows.push_back(std::move(row));
  }
  std::vector<std::string> keys = {"series", axis, "runs"};
  std::vector<bool> text_keys = {true, false, false};
  if (by_vc) {
    keys.insert(keys.begin() + 2, "vc");
    text_keys.insert(text_keys.begin() + 2, true);
  }
  print_rows(out, keys, text_keys, rows, format);
}

void print_comparison(std::ostream& out, const RunReport& a, const RunReport& b) {
  auto name = [](const RunReport& r) {
    const std::string axes = axes_text(r.run.axes);
    return "run " + std::to_string(r.run.id) + " (" + r.run.label + (axes.empty() ? "" : " " + axes) + ")";
  };
  const TimeUnit unit = unit_for({Row{{}, a.summary}, Row{{}, b.summary}});
  std::vector<std::vector<std::string>> lines = {{"", "A: " + name(a), "B: " + name(b), "B / A"}};
  for (const Figure& f : figures()) {
    const double x = f.get(a.summary), y = f.get(b.summary);
    lines.push_back({f.title, table_cell(f, a.summary, unit), table_cell(f, b.summary, unit),
                     x != 0 && std::isfinite(y / x) ? fixed(y / x, 2) : "-"});
  }
  std::vector<std::size_t> width(4, 0);
  for (const auto& line : lines)
    for (std::size_t c = 0; c < 4; ++c) width[c] = std::max(width[c], line[c].size());
  for (const auto& line : lines)
    for (std::size_t c = 0; c < 4; ++c)
      out << (c == 0 ? std::left : std::right) << std::setw(static_cast<int>(width[c])) << line[c]
          << (c < 3 ? "  " : "\n");
}

}  // namespace tessel
