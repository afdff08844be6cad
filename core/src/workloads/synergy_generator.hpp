// Synergy's job generator (msr-fiddle/synergy, commit 1bb2bed,
// simulator/jobs/workload.py Workload.generate_next_job), draw for draw:
// `[workload] kind = "synergy"` gives the jobs its runner.py makes for a
// seed, single-GPU, in its default exponential mode. The parts exposed here
// are what tests check against Python's own output.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "workloads/workload.hpp"

namespace tessel {

// One model of Synergy's zoo (jobs/model_zoo.py create_default_models), in
// its class id order: the class (0 image, 1 language, 2 speech) and the
// iteration time at the GPU-proportional share (Model.iteration_time, from
// simulator/models/<name>_1.py; the same as iter_time_s in
// shared/data/synergy/model_sensitivity.csv).
struct SynergyZooModel {
  std::string_view name;
  int task;
  double iteration_seconds;
};
const std::array<SynergyZooModel, 10>& synergy_model_zoo();

struct SynergyGeneratorParameters {
  std::int64_t jobs = 6000;
  double jobs_per_hour = 9;                       // runner.py: jobs_per_hours = np.arange(9.0, 10, 1)
  std::array<double, 3> class_split{20, 70, 10};  // runner.py: class_split = [(20, 70, 10)]
};

// The first `parameters.jobs` jobs of Synergy's generator for random.seed(seed).
Trace synergy_jobs(const SynergyGeneratorParameters& parameters, std::int64_t seed);

}  // namespace tessel
