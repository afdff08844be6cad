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

}  // namespace tessel
