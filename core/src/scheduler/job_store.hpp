// Where the scheduler keeps its JobStates: in id order, at addresses that
// never move (all_ and the plugins hold pointers), in blocks that can be
// given back to the system as a run's end turns the jobs into rows.
//
// A std::deque of JobState (400 bytes) allocates every job alone, 24 bytes
// of malloc header and map entry besides; and a job freed among others
// leaves its pages resident. Here the blocks grow to kMaxBlock jobs, one
// allocation above the largest mmap threshold glibc's malloc adopts (32 MiB),
// so that such a block is mapped on its own: its pages become resident only
// as jobs are placed in them, and freeing it unmaps it, which release()
// relies on to keep a run's end from holding every job twice. (The smaller
// first blocks may come from the heap and stay resident: 52 MiB at most.)
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "tessel/job.hpp"

namespace tessel {

class JobStore {
 public:
  // The first blocks are small, for the many short-lived schedulers of
  // tests and forks; they double up to kMaxBlock jobs (50 MiB).
  static constexpr std::size_t kFirstBlock = 256;
  static constexpr std::size_t kMaxBlock = std::size_t{1} << 17;

  JobStore() = default;
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;
  ~JobStore() {
    release([](const JobState&) {});
  }

  std::size_t size() const { return size_; }

  // A job after the last, constructed from `args`.
  template <class... Args>
  JobState& emplace_back(Args&&... args) {
    if (blocks_.empty() || blocks_.back().used == blocks_.back().capacity) {
      const std::size_t capacity = blocks_.empty() ? kFirstBlock : std::min(2 * blocks_.back().capacity, kMaxBlock);
      blocks_.push_back({std::allocator<JobState>().allocate(capacity), 0, 0, capacity});
    }
    Block& block = blocks_.back();
    JobState* job = ::new (static_cast<void*>(block.jobs + block.used)) JobState(std::forward<Args>(args)...);
    ++block.used;
    ++size_;
    return *job;
  }

  // Hands each job to `take`, in id order, destroying it after, and frees
  // each block once its jobs are gone. The store is empty after.
  // If `take` throws, the jobs it has not taken stay, and go with the store.
  template <class Take>
  void release(Take&& take) {
    for (Block& block : blocks_) {
      while (block.first < block.used) {
        JobState& job = block.jobs[block.first];
        take(std::as_const(job));
        job.~JobState();
        ++block.first;
        --size_;
      }
      if (block.jobs != nullptr) std::allocator<JobState>().deallocate(block.jobs, block.capacity);
      block = {};
    }
    blocks_.clear();
  }

 private:
  struct Block {
    JobState* jobs = nullptr;
    std::size_t first = 0;  // jobs before it are released
    std::size_t used = 0;
    std::size_t capacity = 0;
  };
  std::vector<Block> blocks_;
  std::size_t size_ = 0;
};

}  // namespace tessel
