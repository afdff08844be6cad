// The parsers of the built-in workload kinds; workload.cpp lists them.
#pragma once

#include "common/text.hpp"
#include "workloads/workload.hpp"

namespace tessel {

std::unique_ptr<WorkloadSource> parse_synthetic_workload(TableReader&);
std::unique_ptr<WorkloadSource> parse_csv_workload(TableReader&);
std::unique_ptr<WorkloadSource> parse_pollux_csv_workload(TableReader&);
std::unique_ptr<WorkloadSource> parse_pollux_workload(TableReader&);
std::unique_ptr<WorkloadSource> parse_gavel_trace_workload(TableReader&);
std::unique_ptr<WorkloadSource> parse_tiresias_csv_workload(TableReader&);
std::unique_ptr<WorkloadSource> parse_openb_workload(TableReader&);
std::unique_ptr<WorkloadSource> parse_philly_json_workload(TableReader&);
std::unique_ptr<WorkloadSource> parse_synergy_workload(TableReader&);

// `jobs` in [workload] for the kinds that generate their jobs: 1..1e8, and no
// more than this process can hold. A finite workload's jobs are held whole
// (the trace, then the run's specs), so a count whose specs alone exceed the
// memory the process may use (memory and swap, or its address-space limit if
// lower) would fail part way, or at once where the trace reserves them all; it
// is refused here, named, before any job is made. Returns the count, or
// `fallback` after a reported problem.
std::int64_t read_job_count(TableReader& reader, std::int64_t fallback);

}  // namespace tessel
