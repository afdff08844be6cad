#include "results/explain.hpp"

#include <algorithm>
#include <cstdio>
#include <iomanip>

#include "engine/errors.hpp"

namespace tessel {

namespace {
// "3600 s" below an hour, "2.50 h" above: what people read at a glance.
std::string when(double seconds) {
  char buffer[32];
  if (seconds < 3600)
    std::snprintf(buffer, sizeof buffer, "%.0f s", seconds);
  else
    std::snprintf(buffer, sizeof buffer, "%.2f h", seconds / 3600);
  return buffer;
}
}  // namespace

void print_explanation(std::ostream& out, ResultsStore& store, std::int64_t run_id, JobId job_id,
                       const ExplainFilter& filter) {
  const auto run = store.run(run_id);
  if (!run) throw UserError(store.path() + ": no run " + std::to_string(run_id));
  const std::vector<JobRecord> jobs = store.jobs(run_id);
  const auto job = std::find_if(jobs.begin(), jobs.end(), [&](const JobRecord& j) { return j.id == job_id; });
  if (job == jobs.end())
    throw UserError("run " + std::to_string(run_id) + " has no job " + std::to_string(job_id) +
                    (jobs.empty() ? " (it has no jobs)" : " (ids 0.." + std::to_string(jobs.back().id) + ")"));

  out << "job " << job->id << (job->name.empty() ? "" : " (" + job->name + ")") << " in run " << run_id << " ("
      << run->label << "): " << job->gpus << " GPU" << (job->gpus == 1 ? "" : "s") << ", " << job->status
      << "\n  arrived " << when(job->arrival);
  if (job->first_start)
    out << ", first started " << when(*job->first_start) << " (waited " << when(*job->first_start - job->arrival)
        << ")";
  if (job->finish) out << ", ended " << when(*job->finish) << " (JCT " << when(*job->finish - job->arrival) << ")";
  out << ", preempted " << job->preemptions << " time" << (job->preemptions == 1 ? "" : "s") << "\n";
  if (job->shared_seconds > 0)
    out << "  shared its GPUs with other jobs for " << when(job->shared_seconds)
        << " (space sharing; its 'place' and 'share' decisions say with whom)\n";

  std::vector<DecisionRecord> decisions = store.decisions(run_id, job_id);
  if (decisions.empty()) {
    out << "no decisions were recorded for this run; rerun it with --set output.decisions=true\n";
    return;
  }
  const std::size_t recorded = decisions.size();
  std::erase_if(decisions, [&](const DecisionRecord& d) {
    return (filter.from && d.time < *filter.from) || (filter.to && d.time > *filter.to) ||
           (filter.stage && d.stage != *filter.stage);
  });
  if (decisions.empty()) {
    out << "none of its " << recorded << " recorded decisions is in the window and stage asked for\n";
    return;
  }
  std::size_t time_width = 0, plugin_width = 0, code_width = 0;
  for (const DecisionRecord& d : decisions) {
    time_width = std::max(time_width, when(d.time).size());
    plugin_width = std::max(plugin_width, d.plugin.size());
    code_width = std::max(code_width, d.code.size());
  }
  for (const DecisionRecord& d : decisions)
    out << "  " << std::right << std::setw(static_cast<int>(time_width)) << when(d.time) << "  " << std::left
        << std::setw(10) << to_string(d.stage) << "  " << std::setw(static_cast<int>(plugin_width)) << d.plugin
        << "  " << std::setw(static_cast<int>(code_width)) << d.code << "  " << d.reason << "\n";
}

}  // namespace tessel
