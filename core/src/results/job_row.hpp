// A job as the results store keeps it: the JobRecord, and the one table of
// its columns. Each column gives its SQL name and type, its JobRecord member,
// and how it is taken from and given back to a JobState; the store's INSERT,
// SELECT and the columns an older database gains (its first CREATE TABLE is
// history, kept as it was), job_record() and job_state() all loop over that
// table. Adding a persisted job field is a JobState/JobSpec member
// (tessel/job.hpp) and one member and one row here.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <variant>

#include "tessel/ids.hpp"
#include "tessel/job.hpp"

namespace tessel {

struct JobRecord {
  JobId id = 0;
  std::string name, tenant, vc, model;
  double arrival = 0;
  std::optional<double> first_start, finish;
  int gpus = 0, min_gpus = 0, max_gpus = 0;
  int gpu_milli = 1000;  // share of each GPU, 1000 = whole GPUs
  int held_gpus = 0;     // GPUs the job held when the run ended (0 unless still running)
  double total_work = 0, executed_work = 0, attained_service = 0, gpu_seconds = 0;
  int preemptions = 0, attempts = 0;
  std::string status;
  bool tracked = true;
  double priority = 1;
  double shared_seconds = 0;  // run time on GPUs shared with other jobs (space sharing)
};

using JobRecordField = std::variant<JobId JobRecord::*, int JobRecord::*, double JobRecord::*, bool JobRecord::*,
                                    std::string JobRecord::*, std::optional<double> JobRecord::*>;

struct JobColumn {
  const char* name;
  const char* sql_type;  // as ALTER TABLE ADD COLUMN takes it: columns added later need a default
  JobRecordField field;
  void (*record)(JobRecord&, const JobState&);
  void (*restore)(JobState&, const JobRecord&);  // nullptr: not part of what a job restores
};

namespace job_columns_detail {

template <auto Member>
struct owner;
template <class Class, class T, T Class::*Member>
struct owner<Member> {
  using type = Class;
};

// A JobSpec member is reached through JobState::spec.
template <auto Member>
constexpr auto& in(auto& state) {
  if constexpr (std::is_same_v<typename owner<Member>::type, JobSpec>)
    return state.spec.*Member;
  else
    return state.*Member;
}

// A column whose JobRecord member is a copy of a JobState or JobSpec member.
template <auto RecordMember, auto StateMember>
constexpr JobColumn copied(const char* name, const char* sql_type) {
  return {name, sql_type, RecordMember,
          [](JobRecord& r, const JobState& s) { r.*RecordMember = in<StateMember>(s); },
          [](JobState& s, const JobRecord& r) { in<StateMember>(s) = r.*RecordMember; }};
}

JobStatus status_named(const std::string& name);

}  // namespace job_columns_detail

// The `jobs` table after run_id, in its order. A new column goes here, in a
// migration for older databases (store.cpp, add_job_columns) and in
// store.cpp's kCurrentSchema for new ones; test_startup_paths checks the two
// schemas agree.
inline constexpr JobColumn kJobColumns[] = {
    job_columns_detail::copied<&JobRecord::id, &JobSpec::id>("job_id", "INTEGER NOT NULL"),
    job_columns_detail::copied<&JobRecord::name, &JobSpec::name>("name", "TEXT NOT NULL"),
    job_columns_detail::copied<&JobRecord::tenant, &JobSpec::tenant>("tenant", "TEXT NOT NULL"),
    job_columns_detail::copied<&JobRecord::vc, &JobSpec::vc>("vc", "TEXT NOT NULL"),
    job_columns_detail::copied<&JobRecord::model, &JobSpec::model>("model", "TEXT NOT NULL"),
    job_columns_detail::copied<&JobRecord::arrival, &JobSpec::arrival>("arrival", "REAL NOT NULL"),
    job_columns_detail::copied<&JobRecord::first_start, &JobState::first_start>("first_start", "REAL"),
    job_columns_detail::copied<&JobRecord::finish, &JobState::finish>("finish", "REAL"),
    job_columns_detail::copied<&JobRecord::gpus, &JobSpec::gpus>("gpus", "INTEGER NOT NULL"),
    job_columns_detail::copied<&JobRecord::min_gpus, &JobSpec::min_gpus>("min_gpus", "INTEGER NOT NULL"),
    job_columns_detail::copied<&JobRecord::max_gpus, &JobSpec::max_gpus>("max_gpus", "INTEGER NOT NULL"),
    job_columns_detail::copied<&JobRecord::total_work, &JobSpec::total_work>("total_work", "REAL NOT NULL"),
    job_columns_detail::copied<&JobRecord::executed_work, &JobState::executed_work>("executed_work",
                                                                                    "REAL NOT NULL"),
    job_columns_detail::copied<&JobRecord::attained_service, &JobState::attained_service>("attained_service",
                                                                                          "REAL NOT NULL"),
    job_columns_detail::copied<&JobRecord::gpu_seconds, &JobState::gpu_seconds>("gpu_seconds", "REAL NOT NULL"),
    job_columns_detail::copied<&JobRecord::preemptions, &JobState::preemptions>("preemptions", "INTEGER NOT NULL"),
    job_columns_detail::copied<&JobRecord::attempts, &JobState::attempts>("attempts", "INTEGER NOT NULL"),
    // A status tessel does not know (a real-node job's 'cancelled') restores as failed.
    {"status", "TEXT NOT NULL", &JobRecord::status,
     [](JobRecord& r, const JobState& s) { r.status = std::string(to_string(s.status)); },
     [](JobState& s, const JobRecord& r) { s.status = job_columns_detail::status_named(r.status); }},
    job_columns_detail::copied<&JobRecord::tracked, &JobSpec::tracked>("tracked", "INTEGER NOT NULL"),
    job_columns_detail::copied<&JobRecord::gpu_milli, &JobSpec::gpu_milli>("gpu_milli",
                                                                          "INTEGER NOT NULL DEFAULT 1000"),
    // What the job held when the run ended; a restored job holds nothing until it is placed again.
    {"held_gpus", "INTEGER NOT NULL DEFAULT 0", &JobRecord::held_gpus,
     [](JobRecord& r, const JobState& s) { r.held_gpus = s.allocation.gpu_count(); }, nullptr},
    job_columns_detail::copied<&JobRecord::priority, &JobSpec::priority>("priority", "REAL NOT NULL DEFAULT 1"),
    job_columns_detail::copied<&JobRecord::shared_seconds, &JobState::shared_seconds>("shared_seconds",
                                                                                      "REAL NOT NULL DEFAULT 0"),
};

// `job` as it stands: its spec, its progress, and the GPUs it holds now.
JobRecord job_record(const JobState& job);
// The job a record describes, as far as a record can: spec, progress and
// counters, but no GPUs (a running job comes back waiting), for a runner
// that restores its jobs from the database.
JobState job_state(const JobRecord& record);

}  // namespace tessel
