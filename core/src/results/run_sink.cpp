#include "results/run_sink.hpp"

namespace tessel {

void BatchSink::job_changed(const JobRecord& job) {
  if (job.id >= results_.jobs.size()) results_.jobs.resize(job.id + 1);
  results_.jobs[job.id] = job;
}

void BatchSink::run_ended(const RunTotals& totals) {
  static_cast<RunTotals&>(results_) = totals;
  results_.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

}  // namespace tessel
