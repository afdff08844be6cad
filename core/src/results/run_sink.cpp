#include "results/run_sink.hpp"

namespace tessel {

bool SampleSteps::changes(const Sample& s) {
  Sample untimed = s;  // the state is every field but the time
  if (recorded_) untimed.time = recorded_->time;
  if (recorded_ && untimed == *recorded_) {
    unrecorded_ = s;
    return false;
  }
  recorded_ = s;
  unrecorded_.reset();
  return true;
}

void BatchSink::job_changed(const JobRecord& job) {
  if (job.id >= results_.jobs.size()) results_.jobs.resize(job.id + 1);
  results_.jobs[job.id] = job;
}

void BatchSink::run_ended(const RunTotals& totals) {
  if (const auto last = steps_.take_unrecorded()) results_.samples.push_back(*last);
  static_cast<RunTotals&>(results_) = totals;
  results_.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

}  // namespace tessel
