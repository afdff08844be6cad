// synthesizer: switches among candidate policies at run time, after Blox's
// scheduler synthesizer (Blox, EuroSys'24).
//
// Every `every_rounds` rounds it simulates each candidate (admission,
// allocation) pair forward from the current state, through the simulator's
// PolicyLab, and adopts the one with the lowest `metric`:
//   time_in_system   mean seconds from arrival to finish of the jobs in the
//                    system or arriving during the forecast, unfinished jobs
//                    counted to the end of the horizon (a fair lower bound
//                    of their JCT)
//   queueing_delay   mean seconds from arrival to first start
// A forecast runs `horizon_seconds` ahead, or with 0 until every job it
// counts is done; with `known_arrivals` it sees the jobs that will arrive
// during it (an oracle), without it only the jobs already submitted. When
// the current choice ties with the best (within a relative 1e-9) it is kept;
// otherwise the earliest best candidate wins. Between evaluations every round
// is delegated to the chosen allocation policy, whose reasons are recorded as
// "<candidate>: <reason>"; the chosen admission policy admits from the next
// round on, and the forecasts start the same way (this round's admission has
// happened), so a forecast is what adopting its candidate does.
//
// Blox's synthesizer (msr-fiddle/blox, blox_examples/blox_new_flow_dynamic_policy.py
// with simulator_runner/predict_simulation.py) evaluates every round, nine
// candidates (Las, Fifo, Srtf x AcceptAll, LoadBased 1.2x and 1.4x), each
// run until the jobs already submitted are done, by their mean JCT, and takes
// the first minimum in candidate order: every_rounds = 1, horizon_seconds =
// 0, known_arrivals = false, metric = "time_in_system" here, except that a
// tie with the current choice keeps it rather than going back to the first.
//
// Simplifications: candidates start with no memory of the run (their plugin
// state is not carried into the fork), while a delegate keeps its own from
// the rounds it decided; the forecast continues the run's random failures
// with the same draws. It needs the simulator's lab, so it cannot run on
// real nodes (nor as a candidate).
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <tessel/tessel.hpp>

namespace {

constexpr tessel::ArgSpec kArgs[] = {
    {"candidates", tessel::ArgType::string_list, nullptr,
     "\"admission + allocation\" pairs, e.g. \"accept_all + fifo\", \"load_based { factor = 1.2 } + las\""},
    {"horizon_seconds", tessel::ArgType::number, "14400",
     "how far ahead each candidate is simulated; 0: until the jobs it counts are done (with known_arrivals, "
     "the whole rest of the trace)"},
    {"every_rounds", tessel::ArgType::integer, "12", "rounds between evaluations"},
    {"metric", tessel::ArgType::string, "\"time_in_system\"", "what the best candidate minimizes",
     "time_in_system|queueing_delay"},
    {"known_arrivals", tessel::ArgType::boolean, "true",
     "forecasts see the jobs that will arrive (an oracle); false: only jobs already submitted, as Blox"},
};

struct Candidate {
  std::string admission;
  std::string allocation;
};

// Splits "admission + allocation" at the '+' outside any braces.
Candidate parse_candidate(const std::string& text) {
  int depth = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    depth += text[i] == '{' ? 1 : text[i] == '}' ? -1 : 0;
    if (text[i] == '+' && depth == 0) {
      auto trim = [](std::string s) {
        s.erase(0, s.find_first_not_of(' '));
        s.erase(s.find_last_not_of(' ') + 1);
        return s;
      };
      Candidate c{trim(text.substr(0, i)), trim(text.substr(i + 1))};
      if (c.admission.empty() || c.allocation.empty()) break;
      // A forecast has no lab of its own to forecast with.
      if (c.allocation.substr(0, c.allocation.find_first_of(" {")) == "synthesizer")
        throw tessel::ArgumentError("candidates", "'" + text + "': a synthesizer cannot be a candidate");
      return c;
    }
  }
  throw tessel::ArgumentError("candidates", "'" + text + "' is not \"admission + allocation\"");
}

class Synthesizer final : public tessel::AllocationPolicy {
 public:
  explicit Synthesizer(const tessel::PluginContext& context)
      : every_(context.args().integer("every_rounds")),
        by_queueing_(context.args().string("metric") == "queueing_delay") {
    options_.horizon_seconds = context.args().number("horizon_seconds");
    options_.known_arrivals = context.args().boolean("known_arrivals");
    for (const std::string& text : context.args().strings("candidates")) {
      candidates_.push_back(parse_candidate(text));
      names_.push_back(std::make_shared<const std::string>(text));
    }
    if (candidates_.empty()) throw tessel::ArgumentError("candidates", "needs at least one candidate");
    if (!(options_.horizon_seconds >= 0)) throw tessel::ArgumentError("horizon_seconds", "must be 0 or more");
    if (every_ < 1) throw tessel::ArgumentError("every_rounds", "must be at least 1");
  }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    tessel::PolicyLab* lab = view.lab();
    if (lab == nullptr)
      throw std::logic_error("synthesizer needs the simulator's policy lab: it runs only in simulation, "
                             "and not as a candidate of another synthesizer");
    if (rounds_++ % every_ == 0) choose(*lab);
    return attributed(lab->allocation(candidates_[chosen_].allocation).allocate(view));
  }

  // The chosen candidate's whole plan, this round (a provisional plan's).
  tessel::AllocationPlan allocate_whole(const tessel::SchedulerView& view) override {
    return attributed(view.lab()->allocation(candidates_[chosen_].allocation).allocate_whole(view));
  }

 private:
  tessel::AllocationPlan attributed(tessel::AllocationPlan plan) const {
    for (tessel::Grant& grant : plan.ranked) grant.reason = grant.reason.attributed_to(names_[chosen_]);
    if (plan.keep_running) plan.keep_running = plan.keep_running->attributed_to(names_[chosen_]);
    return plan;
  }

  void choose(tessel::PolicyLab& lab) {
    std::vector<double> scores;
    double best = std::numeric_limits<double>::infinity();
    for (const Candidate& candidate : candidates_) {
      const tessel::Forecast f = lab.forecast(candidate.admission, candidate.allocation, options_);
      scores.push_back(by_queueing_ ? f.mean_queueing_delay : f.mean_time_in_system);
      best = std::min(best, scores.back());
    }
    // Forecasts of equal schedules can differ in the last bits (events in
    // another order): within this much of the best, a score ties with it.
    const double tolerance = 1e-9 * std::max(1.0, std::abs(best));
    std::size_t next = chosen_;
    if (!(scores[chosen_] <= best + tolerance))
      for (next = 0; scores[next] > best + tolerance; ++next) {
      }
    if (next != chosen_ || !admission_set_) {
      lab.use_admission(candidates_[next].admission);
      admission_set_ = true;
    }
    chosen_ = next;
  }

  std::vector<Candidate> candidates_;
  std::vector<std::shared_ptr<const std::string>> names_;  // the candidates as written, for reasons
  tessel::ForecastOptions options_;
  std::int64_t every_;
  bool by_queueing_;
  std::uint64_t rounds_ = 0;
  std::size_t chosen_ = 0;
  bool admission_set_ = false;
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(Synthesizer, allocation, "synthesizer", "1.0",
                        "switch among candidate policies by simulating each forward (Blox's synthesizer)", kArgs)
