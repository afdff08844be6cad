#include "results/plot.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/program.hpp"
#include "engine/errors.hpp"
#include "results/report.hpp"

namespace tessel {

namespace fs = std::filesystem;

std::vector<std::string> plot_kinds() { return {"jct-cdf", "metric", "occupancy"}; }

namespace {

// gnuplot strings are double-quoted; keep the text printable.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

class Scratch {
 public:
  Scratch() {
    std::string pattern = (fs::temp_directory_path() / "tessel-plot-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw UserError("cannot create a temporary directory for the plot");
    path_ = pattern;
  }
  ~Scratch() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string run_label(const RunRow& run) {
  const std::string axes = axes_text(run.axes);
  return "run " + std::to_string(run.id) + " " + run.label + (axes.empty() ? "" : " " + axes);
}

std::string terminal_for(const std::string& output) {
  const std::string extension = fs::path(output).extension().string();
  // noenhanced: config paths are full of underscores, which gnuplot would subscript.
  if (extension == ".svg") return "set terminal svg size 960,600 dynamic noenhanced font 'Helvetica,13' background '#ffffff'";
  if (extension == ".png") return "set terminal pngcairo size 1280,800 noenhanced font 'Helvetica,13'";
  throw UserError("plot output '" + output + "' must end in .svg or .png");
}

void run_gnuplot(const fs::path& script, const std::string& output) {
  const fs::path errors = script.parent_path() / "gnuplot.err";
  const ProgramExit exit = run_program({"gnuplot", script.string()}, "/dev/null", errors);
  if (exit.spawn_error != 0)
    throw UserError(exit.spawn_error == ENOENT ? std::string("gnuplot is not installed (apt-get install gnuplot-nox)")
                                               : std::string("cannot run gnuplot: ") + std::strerror(exit.spawn_error));
  if (exit.code != 0) throw UserError("gnuplot failed on " + output + ": " + file_text(errors));
}

std::vector<RunRow> chosen_runs(ResultsStore& store, const std::vector<std::int64_t>& ids) {
  std::vector<RunRow> runs;
  if (ids.empty()) {
    for (RunRow& row : store.runs())
      if (row.status == "complete") runs.push_back(std::move(row));
  } else {
    for (std::int64_t id : ids) {
      auto row = store.run(id);
      if (!row) throw UserError(store.path() + ": no run " + std::to_string(id));
      runs.push_back(std::move(*row));
    }
  }
  if (runs.empty()) throw UserError(store.path() + ": no complete run to plot");
  return runs;
}

// gnuplot cycles through 8 colours; after each 8 series the dash and point
// type change, so that a 12-policy figure stays readable.
std::string series_style(std::size_t series) {
  static const int kPoints[] = {7, 5, 9, 11};
  const std::size_t cycle = (series / 8) % 4;
  return " lw 2 dt " + std::to_string(1 + cycle) + " pt " + std::to_string(kPoints[cycle]);
}

void jct_cdf(ResultsStore& store, const PlotRequest& request, const Scratch& scratch, std::ostream& script) {
  script << "set title 'Job completion times'\n"
            "set xlabel 'job completion time (hours)'\nset ylabel 'fraction of jobs'\n"
            "set logscale x\nset key bottom right\nset grid\nset yrange [0:1]\n";
  std::string plots;
  std::size_t series = 0;
  for (const RunRow& run : chosen_runs(store, request.runs)) {
    std::vector<double> jcts;
    for (const JobRecord& job : store.jobs(run.id))
      if (job.tracked && job.finish && job.status == "finished") jcts.push_back((*job.finish - job.arrival) / 3600);
    if (jcts.empty()) continue;
    std::sort(jcts.begin(), jcts.end());
    const fs::path data = scratch.path() / ("run" + std::to_string(run.id) + ".dat");
    std::ofstream out(data);
    for (std::size_t i = 0; i < jcts.size(); ++i)
      out << std::max(jcts[i], 1e-4) << ' ' << double(i + 1) / double(jcts.size()) << '\n';
    plots += (plots.empty() ? "plot " : ", ") + quoted(data.string()) + " using 1:2 with steps" +
             series_style(series++) + " title " + quoted(run_label(run));
  }
  if (plots.empty()) throw UserError(store.path() + ": the chosen runs have no finished jobs");
  script << plots << '\n';
}

void metric_by_axis(ResultsStore& store, const PlotRequest& request, const Scratch& scratch, std::ostream& script) {
  if (request.axis.empty()) throw UserError("plot --kind metric needs --by AXIS (a sweep axis)");
  const Figure* figure = find_figure(request.metric);
  if (figure == nullptr) {
    std::string valid;
    for (const Figure& f : figures()) valid += (valid.empty() ? "" : ", ") + std::string(f.name);
    throw UserError("unknown metric '" + request.metric + "' (valid: " + valid + ")");
  }
  const std::vector<AxisGroup> groups = group_by_axis(load_reports(store, request.runs), request.axis, request.over);
  if (std::all_of(groups.begin(), groups.end(), [&](const AxisGroup& g) { return std::isnan(figure->get(g.mean)); }))
    throw UserError(store.path() + ": " + request.metric +
                    " has no value in the chosen runs: none of their tracked jobs finished (or, for queueing, "
                    "started)");
  const bool numeric = std::all_of(groups.begin(), groups.end(), [](const AxisGroup& g) { return g.value.is_number(); });
  const bool is_time = figure->unit == FigureUnit::seconds;
  const std::string ylabel = is_time ? std::string(figure->title) + " (hours)" : figure_title(*figure);
  script << "set title " << quoted(ylabel + " by " + request.axis) << "\nset xlabel " << quoted(request.axis)
         << "\nset ylabel " << quoted(ylabel) << "\nset key outside right\nset grid\n";
  std::vector<std::string> values;  // x positions of non-numeric values
  for (const AxisGroup& g : groups)
    if (!numeric && std::find(values.begin(), values.end(), g.value.dump()) == values.end())
      values.push_back(g.value.dump());
  if (!numeric) {
    script << "set xtics (";
    for (std::size_t i = 0; i < values.size(); ++i)
      script << (i ? ", " : "") << quoted(nlohmann::json::parse(values[i]).is_string()
                                              ? nlohmann::json::parse(values[i]).get<std::string>()
                                              : values[i])
             << ' ' << i;
    script << ")\nset xrange [-0.5:" << values.size() - 0.5 << "]\n";
  }
  std::string plots;
  std::size_t file = 0;
  for (auto begin = groups.begin(); begin != groups.end();) {
    auto end = std::find_if(begin, groups.end(), [&](const AxisGroup& g) { return g.series != begin->series; });
    const fs::path data = scratch.path() / ("series" + std::to_string(file++) + ".dat");
    std::ofstream out(data);
    for (auto g = begin; g != end; ++g) {
      const double x = numeric ? g->value.get<double>()
                               : double(std::find(values.begin(), values.end(), g->value.dump()) - values.begin());
      const double y = figure->get(g->mean) / (is_time ? 3600 : 1);
      if (std::isnan(y)) continue;  // a figure over no jobs: no point
      out << x << ' ' << y << '\n';
    }
    plots += (plots.empty() ? "plot " : ", ") + quoted(data.string()) + " using 1:2 with linespoints" +
             series_style(file - 1) + " title " + quoted(begin->series);
    begin = end;
  }
  script << plots << '\n';
}

void occupancy(ResultsStore& store, const PlotRequest& request, const Scratch& scratch, std::ostream& script) {
  std::vector<RunRow> runs = chosen_runs(store, request.runs);
  const RunRow& run = runs.back();
  const std::vector<Sample> samples = store.samples(run.id);
  if (samples.empty()) throw UserError("run " + std::to_string(run.id) + " recorded no samples");
  const fs::path data = scratch.path() / "occupancy.dat";
  std::ofstream out(data);
  for (const Sample& s : samples)
    out << s.time / 3600 << ' ' << s.busy_gpus << ' ' << s.total_gpus << ' ' << s.waiting_jobs + s.pending_jobs
        << '\n';
  out.close();
  script << "set title " << quoted("Cluster occupancy and queue, " + run_label(run))
         << "\nset xlabel 'time (hours)'\nset ylabel 'GPUs'\nset y2label 'waiting jobs'\nset y2tics\nset ytics nomirror\n"
            "set key outside right\nset grid\nset yrange [0:*]\nset y2range [0:*]\n"
         << "plot " << quoted(data.string()) << " using 1:2 with steps lw 2 title 'busy GPUs', "
         << quoted(data.string()) << " using 1:3 with steps lw 1 dt 2 title 'GPUs up', " << quoted(data.string())
         << " using 1:4 axes x1y2 with steps lw 2 title 'waiting jobs'\n";
}

}  // namespace

void plot(ResultsStore& store, const PlotRequest& request) {
  Scratch scratch;
  const fs::path script_path = scratch.path() / "plot.gp";
  std::ofstream script(script_path);
  script << terminal_for(request.output) << "\nset output " << quoted(request.output) << "\nset encoding utf8\n";
  if (request.kind == "jct-cdf")
    jct_cdf(store, request, scratch, script);
  else if (request.kind == "metric")
    metric_by_axis(store, request, scratch, script);
  else if (request.kind == "occupancy")
    occupancy(store, request, scratch, script);
  else
    throw UserError("unknown plot kind '" + request.kind + "' (valid: jct-cdf, metric, occupancy)");
  script.close();
  run_gnuplot(script_path, request.output);
}

}  // namespace tessel
