#include "scheduler/decision_log.hpp"

namespace tessel {

void DecisionLog::record(double time, JobId job, PluginKind stage, std::string_view plugin,
                         std::string_view code, const Reason& reason) {
  if (!enabled_) return;
  std::string kind = reason.kind();
  const std::uint64_t key = (static_cast<std::uint64_t>(job) << 3) | static_cast<std::uint64_t>(stage);
  if (auto it = last_.find(key); it != last_.end()) {
    const DecisionRecord& last = records_[it->second.index];
    if (last.code == code && last.plugin == plugin && it->second.kind == kind) return;
  }
  last_[key] = {records_.size(), std::move(kind)};
  records_.push_back({time, job, stage, std::string(plugin), std::string(code), reason.str()});
}

}  // namespace tessel
