// Extension slots: per-job and per-node storage that belongs to one plugin.
//
// Plugins must not keep global maps keyed by job: the core copies, forks and
// restores its state (what-if simulation, recovery), and plugin state has to
// travel with it. A plugin asks its PluginContext for a slot once, then reads
// and writes `slot(job)` during its calls. Slots are the one thing a plugin may
// write through a const JobState&; the core never looks inside them.
//
// Each composed scheduler has its own SlotRegistry, and a slot is keyed by its
// registry as well as its index. A fork copies jobs and nodes with all their
// slots, and its plugins, composed afresh with a registry of their own, see
// only what they wrote themselves: never a value of another plugin's type that
// happens to sit at the same index.
#pragma once

#include <any>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <vector>

namespace tessel {

struct SlotKey {
  std::uint64_t registry = 0;
  std::uint32_t index = 0;
  bool operator==(const SlotKey&) const = default;
};

class SlotStorage {
 private:
  template <class T>
  friend class Slot;
  struct Entry {
    SlotKey key;
    std::any value;
  };
  // Plugins compile these accessors in: a change is an ABI change (abi_layout.hpp).
  static_assert(sizeof(Entry) == 32, "SlotStorage::Entry changed: bump kAbiVersion and the pins");
  // A job holds a handful of slots at most, so a short vector beats a map.
  std::any& at(SlotKey key) const {
    for (Entry& entry : entries_)
      if (entry.key == key) return entry.value;
    return entries_.emplace_back(Entry{key, {}}).value;
  }
  mutable std::vector<Entry> entries_;
};

// T must be default-constructible and copyable (forks copy it).
template <class T>
class Slot {
 public:
  explicit Slot(SlotKey key) : key_(key) {}

  T& operator()(const SlotStorage& storage) const {
    std::any& value = storage.at(key_);
    if (!value.has_value()) return value.template emplace<T>();
    if (T* typed = std::any_cast<T>(&value)) return *typed;
    throw std::logic_error("plugin slot " + std::to_string(key_.index) + " holds a " + value.type().name() +
                           ", not the " + typeid(T).name() + " its plugin asked for");
  }

 private:
  SlotKey key_;
};

// Hands out slot keys; one per composed scheduler, each with its own identity.
class SlotRegistry {
 public:
  SlotRegistry() : id_(next_id()) {}
  SlotRegistry(const SlotRegistry&) = delete;
  SlotRegistry& operator=(const SlotRegistry&) = delete;

  SlotKey next_job_slot() { return {id_, job_slots_++}; }
  SlotKey next_node_slot() { return {id_, node_slots_++}; }

 private:
  static std::uint64_t next_id() {
    static std::atomic<std::uint64_t> last{0};
    return ++last;
  }
  std::uint64_t id_;
  std::uint32_t job_slots_ = 0;
  std::uint32_t node_slots_ = 0;
};

}  // namespace tessel
