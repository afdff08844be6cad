#include "results/job_row.hpp"

namespace tessel {

JobStatus job_columns_detail::status_named(const std::string& name) {
  for (JobStatus status : {JobStatus::pending, JobStatus::queued, JobStatus::running, JobStatus::preempted,
                           JobStatus::finished, JobStatus::failed, JobStatus::rejected})
    if (to_string(status) == name) return status;
  return JobStatus::failed;
}

JobRecord job_record(const JobState& job) {
  JobRecord record;
  for (const JobColumn& column : kJobColumns) column.record(record, job);
  return record;
}

JobState job_state(const JobRecord& record) {
  JobState job;
  for (const JobColumn& column : kJobColumns)
    if (column.restore) column.restore(job, record);
  return job;
}

}  // namespace tessel
