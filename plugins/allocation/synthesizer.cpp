// synthesizer: switches among candidate policies at run time, after Blox's
// scheduler synthesizer (Blox, EuroSys'24).
//
// Every `every_rounds` rounds it simulates each candidate (admission,
// allocation) pair `horizon_seconds` forward from the current state, through
// the simulator's PolicyLab, and adopts the one with the lowest `metric`:
//   time_in_system   mean seconds from arrival to finish, unfinished jobs
//                    counted to the end of the horizon (a fair lower bound
//                    of their JCT)
//   queueing_delay   mean seconds from arrival to first start
// Between evaluations it delegates every round to the chosen allocation
// policy, and the chosen admission policy decides admission.
//
// Simplifications: the forecast knows the arrivals to come (an oracle, as
// Blox's simulation-driven synthesizer is); candidates start with no memory
// of the run (their plugin state is not carried into the fork); this
// round's admission has already happened when a new choice is made, so an
// admission switch takes effect from the next round. It needs the
// simulator's lab, so it cannot run on real nodes (nor as a candidate).
#include <limits>
#include <stdexcept>
#include <string>

#include <tessel/tessel.hpp>

namespace {

constexpr tessel::ArgSpec kArgs[] = {
    {"candidates", tessel::ArgType::string_list, nullptr,
     "\"admission + allocation\" pairs, e.g. \"accept_all + fifo\", \"load_based { factor = 1.2 } + las\""},
    {"horizon_seconds", tessel::ArgType::number, "14400", "how far ahead each candidate is simulated"},
    {"every_rounds", tessel::ArgType::integer, "12", "rounds between evaluations"},
    {"metric", tessel::ArgType::string, "\"time_in_system\"", "what the best candidate minimizes",
     "time_in_system|queueing_delay"},
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
      if (!c.admission.empty() && !c.allocation.empty()) return c;
      break;
    }
  }
  throw tessel::ArgumentError("candidates", "'" + text + "' is not \"admission + allocation\"");
}

class Synthesizer final : public tessel::AllocationPolicy {
 public:
  explicit Synthesizer(const tessel::PluginContext& context)
      : horizon_(context.args().number("horizon_seconds")),
        every_(context.args().integer("every_rounds")),
        by_queueing_(context.args().string("metric") == "queueing_delay") {
    for (const std::string& text : context.args().strings("candidates")) candidates_.push_back(parse_candidate(text));
    if (candidates_.empty()) throw tessel::ArgumentError("candidates", "needs at least one candidate");
    if (horizon_ <= 0) throw tessel::ArgumentError("horizon_seconds", "must be positive");
    if (every_ < 1) throw tessel::ArgumentError("every_rounds", "must be at least 1");
  }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    tessel::PolicyLab* lab = view.lab();
    if (lab == nullptr)
      throw std::logic_error("synthesizer needs the simulator's policy lab: it runs only in simulation, "
                             "and not as a candidate of another synthesizer");
    if (rounds_++ % every_ == 0) choose(*lab);
    return lab->allocation(candidates_[chosen_].allocation).allocate(view);
  }

 private:
  void choose(tessel::PolicyLab& lab) {
    double best = std::numeric_limits<double>::infinity();
    std::size_t best_index = chosen_;
    for (std::size_t i = 0; i < candidates_.size(); ++i) {
      const tessel::Forecast f = lab.forecast(candidates_[i].admission, candidates_[i].allocation, horizon_);
      const double score = by_queueing_ ? f.mean_queueing_delay : f.mean_time_in_system;
      if (score < best) {  // ties keep the earlier candidate
        best = score;
        best_index = i;
      }
    }
    if (best_index != chosen_ || !admission_set_) {
      lab.use_admission(candidates_[best_index].admission);
      admission_set_ = true;
    }
    chosen_ = best_index;
  }

  std::vector<Candidate> candidates_;
  double horizon_;
  std::int64_t every_;
  bool by_queueing_;
  std::uint64_t rounds_ = 0;
  std::size_t chosen_ = 0;
  bool admission_set_ = false;
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(Synthesizer, allocation, "synthesizer", "1.0",
                        "switch among candidate policies by simulating each forward (Blox's synthesizer)", kArgs)
