// Extension slots: per-job and per-node storage that belongs to one plugin.
//
// Plugins must not keep global maps keyed by job: the core copies, forks and
// restores its state (what-if simulation, recovery), and plugin state has to
// travel with it. A plugin asks its PluginContext for a slot once, then reads
// and writes `slot(job)` during its calls. Slots are the one thing a plugin may
// write through a const JobState&; the core never looks inside them.
#pragma once

#include <any>
#include <cstddef>
#include <vector>

namespace tessel {

class SlotStorage {
 private:
  template <class T>
  friend class Slot;
  mutable std::vector<std::any> values_;
};

// T must be default-constructible and copyable (forks copy it).
template <class T>
class Slot {
 public:
  explicit Slot(std::size_t index) : index_(index) {}

  T& operator()(const SlotStorage& storage) const {
    auto& values = storage.values_;
    if (values.size() <= index_) values.resize(index_ + 1);
    std::any& value = values[index_];
    if (!value.has_value()) value.template emplace<T>();
    return *std::any_cast<T>(&value);
  }

 private:
  std::size_t index_;
};

// Hands out slot indices; one per composed scheduler.
class SlotRegistry {
 public:
  std::size_t next_job_slot() { return job_slots_++; }
  std::size_t next_node_slot() { return node_slots_++; }

 private:
  std::size_t job_slots_ = 0;
  std::size_t node_slots_ = 0;
};

}  // namespace tessel
