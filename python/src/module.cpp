// tessel._tessel: the C++ core as a Python extension module. The Python
// package (python/tessel) wraps it; users import `tessel`, not this.
//
// A run releases the GIL for its whole length: simulations run in threads,
// and a Python policy's calls take the GIL only while they run. The calling
// thread meanwhile waits for the run, taking the GIL every 50 ms to let
// Python handle signals, so Ctrl-C stops the run (marked 'interrupted') and
// raises KeyboardInterrupt.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <thread>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "build_config.hpp"
#include "engine/errors.hpp"
#include "experiment_runner.hpp"
#include "results/report.hpp"
#include "results/store.hpp"
#include "sdk_types.hpp"
#include "simulation.hpp"

namespace py = pybind11;

namespace tessel::python {

namespace {

// tessel.Error, tessel.ConfigError and tessel.PolicyError.
PyObject* error_type = nullptr;
PyObject* config_error_type = nullptr;
PyObject* policy_error_type = nullptr;

struct RunOutcome {
  std::string database;
  std::vector<std::int64_t> runs;  // this call's, in point order; 0 for points skipped or not run
  std::size_t points = 0;
  std::size_t skipped = 0;
  std::vector<std::string> notes;
};

RunOutcome run(const std::string& config, const std::vector<std::string>& overrides, const std::string& database,
               unsigned parallel, bool resume) {
  std::atomic<bool> stop{false};
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  ExperimentOutcome outcome;
  std::exception_ptr error;

  std::thread runner;
  {
    py::gil_scoped_release release;
    runner = std::thread([&] {
      try {
        ExperimentPlan plan = plan_experiment({config, overrides, database, parallel, resume, std::nullopt});
        outcome = run_experiment(std::move(plan), &stop);
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard lock(mutex);
      done = true;
      finished.notify_all();
    });
  }
  bool interrupted = false;
  while (true) {
    {
      py::gil_scoped_release release;
      std::unique_lock lock(mutex);
      if (finished.wait_for(lock, std::chrono::milliseconds(50), [&] { return done; })) break;
    }
    if (!interrupted && PyErr_CheckSignals() != 0) {  // Ctrl-C: KeyboardInterrupt is now pending
      interrupted = true;
      stop = true;
    }
  }
  {
    py::gil_scoped_release release;
    runner.join();
  }
  if (interrupted && error) {
    try {
      std::rethrow_exception(error);
    } catch (const Interrupted&) {
      PyErr_Clear();  // the run's own account of the stop says what was stopped
      throw;
    } catch (...) {  // another failure, at the same moment: the Ctrl-C is what the user sees
    }
  }
  if (interrupted) throw py::error_already_set();
  if (error) std::rethrow_exception(error);
  return {outcome.database, outcome.runs, outcome.points, outcome.skipped, outcome.notes};
}

// The report of `tessel report --format json`, with or without --by.
std::string report_json(const std::string& database, const std::vector<std::int64_t>& runs, const std::string& by,
                        const std::vector<std::string>& over, const std::string& group) {
  if (!std::filesystem::exists(database)) throw UserError(database + ": no such results database");
  if (group != "" && group != "vc") throw UserError("group must be 'vc' or empty, not '" + group + "'");
  if (by.empty() && !over.empty()) throw UserError("'over' averages over an axis within a 'by' grouping: give 'by' too");
  ResultsStore store(database, /*create=*/false);
  const JobGrouping grouping = group == "vc" ? JobGrouping::vc : JobGrouping::none;
  const auto reports = load_reports(store, runs, grouping);
  std::ostringstream out;
  if (reports.empty()) return "[]";
  if (by.empty())
    print_report(out, reports, ReportFormat::json, grouping);
  else
    print_grouped_report(out, group_by_axis(reports, by, over), by, ReportFormat::json, grouping);
  return out.str();
}

}  // namespace

}  // namespace tessel::python

PYBIND11_MODULE(_tessel, m) {
  using namespace tessel;
  m.doc() = "tessel's C++ core; import tessel, not this module";
  m.attr("__version__") = kVersion;

  // The exception types are never freed: a static py::object would be
  // released after the interpreter is gone. The most specific is caught first.
  python::error_type = (new py::exception<UserError>(m, "Error"))->ptr();
  python::config_error_type = (new py::exception<ConfigError>(m, "ConfigError", python::error_type))->ptr();
  python::policy_error_type = (new py::exception<HostedCodeFailure>(m, "PolicyError", python::error_type))->ptr();
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const HostedCodeFailure& e) {
      PyErr_SetString(python::policy_error_type, e.what());
    } catch (const ConfigError& e) {
      PyErr_SetString(python::config_error_type, e.what());
    } catch (const UserError& e) {
      PyErr_SetString(python::error_type, e.what());
    } catch (const Interrupted& e) {
      PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
    }
  });

  python::bind_sdk(m);

  m.def(
      "run",
      [](const std::string& config, const std::vector<std::string>& overrides, const std::string& database,
         unsigned parallel, bool resume) {
        const python::RunOutcome outcome = python::run(config, overrides, database, parallel, resume);
        return py::make_tuple(outcome.database, outcome.runs, outcome.points, outcome.skipped, outcome.notes);
      },
      py::arg("config"), py::arg("overrides"), py::arg("database"), py::arg("parallel"), py::arg("resume"),
      "Runs an experiment file; returns (database, run ids, points, skipped, notes).");
  m.def(
      "check_results",
      [](const std::string& database) { ResultsStore store(database, /*create=*/false); },
      py::arg("database"),
      "Opens a results database as report does, and lets it go: raises Error for a file that is not one.");
  m.def("report_json", &python::report_json, py::arg("database"), py::arg("runs"), py::arg("by"), py::arg("over"),
        py::arg("group"), "The report `tessel report --format json` prints.");
  m.def(
      "figures",
      [] {
        std::vector<std::pair<std::string, std::string>> out;
        for (const Figure& figure : figures()) out.emplace_back(figure.name, figure_title(figure));
        return out;
      },
      "Every figure of a report: (name, title with its unit).");
}
