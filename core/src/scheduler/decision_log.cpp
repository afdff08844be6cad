#include "scheduler/decision_log.hpp"

namespace tessel {

void DecisionLog::record(double time, JobId job, PluginKind stage, std::string_view plugin,
                         std::string_view code, const Reason& reason) {
  if (!enabled_) return;
  std::string text = reason.str();
  const std::uint64_t key = (static_cast<std::uint64_t>(job) << 3) | static_cast<std::uint64_t>(stage);
  if (auto it = last_.find(key); it != last_.end()) {
    const DecisionRecord& last = records_[it->second];
    if (last.code == code && last.reason == text && last.plugin == plugin) return;
  }
  last_[key] = records_.size();
  records_.push_back({time, job, stage, std::string(plugin), std::string(code), std::move(text)});
}

}  // namespace tessel
