// A test policy that asks the lab for one forecast and then adopts its
// candidate, as a synthesizer with one evaluation would. The forecast's
// figures become the reason of every grant in that round, so a test reads
// them from the decisions and compares them with what the run then did.
#include <cstdio>
#include <optional>
#include <string>

#include <tessel/tessel.hpp>

namespace {

constexpr tessel::ArgSpec kArgs[] = {
    {"admission", tessel::ArgType::string, nullptr, "the candidate's admission"},
    {"allocation", tessel::ArgType::string, nullptr, "the candidate's allocation"},
    {"before", tessel::ArgType::string, "\"fifo\"", "the allocation until the forecast"},
    {"at_round", tessel::ArgType::integer, "0", "the round (0, 1, ...) that forecasts and switches"},
    {"horizon_seconds", tessel::ArgType::number, "0", "the forecast's horizon"},
    {"known_arrivals", tessel::ArgType::boolean, "true", "the forecast's foresight"},
};

class ForecastProbe final : public tessel::AllocationPolicy {
 public:
  explicit ForecastProbe(const tessel::PluginContext& context)
      : admission_(context.args().string("admission")), allocation_(context.args().string("allocation")),
        before_(context.args().string("before")), at_round_(context.args().integer("at_round")) {
    options_.horizon_seconds = context.args().number("horizon_seconds");
    options_.known_arrivals = context.args().boolean("known_arrivals");
  }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    tessel::PolicyLab& lab = *view.lab();
    reason_.reset();
    if (round_++ == at_round_) {
      const tessel::Forecast f = lab.forecast(admission_, allocation_, options_);
      lab.use_admission(admission_);
      char text[256];
      std::snprintf(text, sizeof text, "forecast in_system=%.17g queueing=%.17g jobs=%zu finished=%zu end=%.17g",
                    f.mean_time_in_system, f.mean_queueing_delay, f.jobs, f.finished, f.end);
      reason_ = tessel::Reason::text(text);
    }
    current_ = round_ > at_round_ ? allocation_ : before_;
    return adopted(lab.allocation(current_).allocate(view));
  }

  // The same candidate's whole plan, this round (a provisional plan's).
  tessel::AllocationPlan allocate_whole(const tessel::SchedulerView& view) override {
    return adopted(view.lab()->allocation(current_).allocate_whole(view));
  }

 private:
  // In the forecast's round, every reason is the forecast.
  tessel::AllocationPlan adopted(tessel::AllocationPlan plan) const {
    if (!reason_) return plan;
    for (tessel::Grant& grant : plan.ranked) grant.reason = *reason_;
    if (plan.keep_running) plan.keep_running = *reason_;
    return plan;
  }

  std::string admission_, allocation_, before_, current_;
  std::optional<tessel::Reason> reason_;
  std::int64_t at_round_;
  std::int64_t round_ = 0;
  tessel::ForecastOptions options_;
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(ForecastProbe, allocation, "forecast_probe", "1.0",
                        "test policy: one forecast through the lab, then its candidate", kArgs)
