// Synergy's generator, draw for draw (synergy_generator.hpp). What the
// artifact's run (ae-readme.md, "Testing the functionality": `python
// runner.py --cluster_job_log trace/cluster_job_log`, seed 42) draws:
//
// - runner.py calls random.seed(seed) before the run. Every job is made at
//   the previous one's arrival (JobArrivalEvent -> Runner.add_next_job): its
//   gap is poisson_next_arrival_time (helpers/utils.py),
//   ceil(-log(1 - random()) / jobs_per_hour * 60 * 60) whole seconds, the
//   first counted from 0; then ModelZoo.get_job_class draws randint(0, 9),
//   which ModelAssignment.OVERALL then ignores (it draws "to ensure the rand
//   generator state is identical across all options"). Nothing else in the
//   simulator draws from `random` (its schedulers and placement do not), so
//   the stream is the same whatever the policy.
// - The model: OVERALL takes the class furthest below its share of the jobs
//   so far (Task.update_priority: percent/100 - class jobs/all jobs, every
//   priority 0 before the first job; ties to the first of image, language,
//   speech, as Python's stable sort keeps them), and that class's models in
//   turn (Task.get_next_model). The counts grow as each job arrives
//   (Runner.start_job -> add_runnable_job), before the next one is made.
// - The duration: with --cluster_job_log the jobs come from the Philly
//   trace, read once into philly_jobs_sum_attempts_exp_single.pickle, which
//   the repository ships and the run loads; in exponential mode
//   parse_jobs_full redraws every kept job's duration with
//   get_gavel_like_iter: 60 * 10**uniform(3, 4) s if random() >= 0.8, else
//   60 * 10**uniform(1.5, 3), two draws per job, in the trace's order. The
//   shipped file's content is not in any snapshot we could read; we take it
//   as made by the same command, so drawn from random.seed(seed) before any
//   arrival: a second stream with the same seed. (Its trace position does
//   not matter: every job is single-GPU and its duration redrawn.)
//   add_synergy_profile turns it into int(duration / iteration time)
//   iterations of the model; a job runs that many whole iterations, so its
//   time at the share is that count times the iteration time.
#include "workloads/synergy_generator.hpp"

#include <cmath>
#include <memory>
#include <string>

#include "common/python_random.hpp"
#include "workloads/kinds.hpp"

namespace tessel {

const std::array<SynergyZooModel, 10>& synergy_model_zoo() {
  static const std::array<SynergyZooModel, 10> zoo{{
      {"alexnet", 0, 0.6},
      {"res18", 0, 0.64},
      {"res50", 0, 0.78},
      {"mobilenet", 0, 0.71},
      {"shufflenet", 0, 0.615},
      {"gnmt", 1, 0.12},
      {"transformer", 1, 0.67},
      {"lstm", 1, 0.011},
      {"m5", 2, 0.6},
      {"deepspeech", 2, 0.757},
  }};
  return zoo;
}

namespace {

// ModelZoo with ModelAssignment.OVERALL: which model the next job gets.
class OverallAssignment {
 public:
  explicit OverallAssignment(const std::array<double, 3>& split) : split_(split) {
    for (std::size_t id = 0; id < synergy_model_zoo().size(); ++id)
      models_[static_cast<std::size_t>(synergy_model_zoo()[id].task)].push_back(id);
  }

  std::size_t next() {
    std::size_t task = 0;
    for (std::size_t t = 1; t < 3; ++t)
      if (priority_[t] > priority_[task]) task = t;  // strictly: ties stay with the earlier class
    const auto& models = models_[task];
    const std::size_t id = models[turn_[task]++ % models.size()];
    ++jobs_[task];
    ++total_;
    for (std::size_t t = 0; t < 3; ++t)
      priority_[t] = split_[t] / 100 - static_cast<double>(jobs_[t]) / static_cast<double>(total_);
    return id;
  }

 private:
  std::array<double, 3> split_;
  std::array<std::vector<std::size_t>, 3> models_;
  std::array<double, 3> priority_{};
  std::array<std::int64_t, 3> jobs_{};
  std::array<std::size_t, 3> turn_{};
  std::int64_t total_ = 0;
};

class SynergyWorkload final : public WorkloadSource {
 public:
  explicit SynergyWorkload(SynergyGeneratorParameters parameters) : p_(parameters) {}

  Trace read(std::uint64_t seed) const override {
    Trace trace = synergy_jobs(p_, static_cast<std::int64_t>(seed));
    trace.notes.push_back("Synergy's generator, random.seed(" + std::to_string(seed) +
                          "): arrivals and models as its runner.py draws them; durations from a second "
                          "stream of the same seed, as its shipped job list is taken to be drawn");
    return trace;
  }

 private:
  SynergyGeneratorParameters p_;
};

}  // namespace

Trace synergy_jobs(const SynergyGeneratorParameters& p, std::int64_t seed) {
  PythonRandom arrivals(seed), durations(seed);
  OverallAssignment assignment(p.class_split);
  const auto& zoo = synergy_model_zoo();
  Trace trace;
  trace.jobs.reserve(static_cast<std::size_t>(p.jobs));
  double now = 0;
  for (std::int64_t i = 0; i < p.jobs; ++i) {
    // Python evaluates next_arrival_in_hours * 60 * 60 left to right.
    now += std::ceil(-std::log(1.0 - arrivals.random()) / p.jobs_per_hour * 60 * 60);
    arrivals.randint(0, static_cast<std::int64_t>(zoo.size()) - 1);
    const SynergyZooModel& model = zoo[assignment.next()];
    const double log10_minutes = durations.random() >= 0.8 ? durations.uniform(3, 4) : durations.uniform(1.5, 3);
    const double seconds = 60 * std::pow(10.0, log10_minutes);
    const double iterations = std::trunc(seconds / model.iteration_seconds);  // Python's int()
    TraceJob job;
    job.spec.arrival = now;
    job.spec.gpus = job.spec.min_gpus = job.spec.max_gpus = 1;
    job.spec.model = std::string(model.name);
    job.duration = iterations * model.iteration_seconds;
    trace.jobs.push_back(std::move(job));
  }
  return trace;
}

std::unique_ptr<WorkloadSource> parse_synergy_workload(TableReader& reader) {
  SynergyGeneratorParameters p;
  p.jobs = read_job_count(reader, p.jobs);
  const auto rate = reader.number("jobs_per_hour", p.jobs_per_hour, 0);
  if (rate && *rate <= 0)
    reader.error("jobs_per_hour", "'jobs_per_hour' in [workload] must be > 0 for kind = \"synergy\"");
  else if (rate)
    p.jobs_per_hour = *rate;
  const std::vector<double> fallback(p.class_split.begin(), p.class_split.end());
  if (const auto split = reader.numbers("class_split", fallback, 0, 100)) {
    double total = 0;
    for (double share : *split) total += share;
    if (split->size() != 3 || total <= 0)
      reader.error("class_split", "'class_split' in [workload] must be three percentages [image, language, "
                                  "speech] with a positive sum, as Synergy's model_class_split");
    else
      std::copy(split->begin(), split->end(), p.class_split.begin());
  }
  return std::make_unique<SynergyWorkload>(p);
}

}  // namespace tessel
