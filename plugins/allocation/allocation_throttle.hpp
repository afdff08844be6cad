// How often an allocation policy may recompute its allocation, after
// Gavel's simulator (stanford-futuredata/gavel, scheduler/scheduler.py,
// `_update_priorities`): a recompute that is due (the jobs or the GPUs
// changed) happens only when `min_seconds` have passed since the last one,
// or when the last one was at time 0 (or there was none). Gavel keeps
// `_last_reset_time` at 0 until its first reset after time 0, so the first
// change after a start at time 0 is served at once and later ones wait out
// the interval (`minimum_time_between_allocation_resets`, 1,920 s by
// default there). Between recomputes the policy keeps its last allocation:
// GPUs freed meanwhile may stay idle for several rounds.
//
// Used by the `fifo` and `gavel` allocation plugins (argument
// `min_seconds_between_allocations`; 0, the default, recomputes at every
// change). A plugin that holds a due recompute back gives next_allowed() as
// its plan's revisit_at: with rounds at events (`[simulation] rounds =
// "events"`) no round might otherwise come until the next event.
#pragma once

#include <string_view>

#include <tessel/tessel.hpp>

namespace tessel_plugins {

class AllocationThrottle {
 public:
  // `argument` names the plugin argument the interval came from, for errors.
  AllocationThrottle(double min_seconds, std::string_view argument) : min_seconds_(min_seconds) {
    if (!(min_seconds >= 0)) throw tessel::ArgumentError(std::string(argument), "must be >= 0 seconds");
  }

  bool enabled() const { return min_seconds_ > 0; }
  double seconds() const { return min_seconds_; }
  // When a recompute that allow() refused may happen.
  double next_allowed() const { return last_ + min_seconds_; }

  // A recompute is due at `now`: whether it may happen now. If it may, it
  // counts as done at `now`.
  bool allow(double now) {
    if (enabled() && last_ != 0 && now - last_ < min_seconds_) return false;
    last_ = now;
    return true;
  }

 private:
  double min_seconds_;
  double last_ = 0;  // Gavel's _last_reset_time: 0 until a recompute after time 0
};

}  // namespace tessel_plugins
