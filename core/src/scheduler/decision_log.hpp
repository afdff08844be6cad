// Decisions and their reasons, kept for `tessel explain`.
//
// A waiting job gets the same decision every round; recording each would
// flood the database. The log keeps a decision only when it differs from the
// last one kept for the same job and stage: in its plugin, its code or the
// kind of its reason (Reason::kind), not merely in its measurements, so LAS's
// "attained 3600 GPU-s" and "attained 3900 GPU-s" are one decision. When disabled, it costs one
// branch per decision and reasons are never turned into text.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tessel/ids.hpp"
#include "tessel/plugin.hpp"
#include "tessel/reason.hpp"

namespace tessel {

struct DecisionRecord {
  double time;
  JobId job;
  PluginKind stage;
  std::string plugin;
  std::string code;
  std::string reason;
};

class DecisionLog {
 public:
  explicit DecisionLog(bool enabled = false) : enabled_(enabled) {}

  bool enabled() const { return enabled_; }
  void record(double time, JobId job, PluginKind stage, std::string_view plugin,
              std::string_view code, const Reason& reason);
  const std::vector<DecisionRecord>& records() const { return records_; }

 private:
  bool enabled_;
  std::vector<DecisionRecord> records_;
  struct Last {
    std::size_t index;  // in records_
    std::string kind;   // of its reason
  };
  std::unordered_map<std::uint64_t, Last> last_;  // by (job, stage)
};

}  // namespace tessel
