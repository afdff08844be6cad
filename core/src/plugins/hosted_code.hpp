// Stopping the user's code that plugins host (a Python policy), which may
// run for as long as it likes where nothing else can stop it: in a loop of
// its own, in the module it imports, in its constructor.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessel {

// While it lives, a thread of its own asks `stopping` every 20 ms. Once it
// says yes, `on_stop` runs (once, on that thread), and from then on each
// poll interrupts the hosted code running on the watched threads
// (interrupt_hosted_code) until the watch ends. The runners make one around
// whatever may run hosted code: a sweep's runs, `serve`'s daemon, loading
// an experiment.
class HostedCodeWatch {
 public:
  explicit HostedCodeWatch(std::function<bool()> stopping, std::function<void()> on_stop = {});
  ~HostedCodeWatch();
  HostedCodeWatch(const HostedCodeWatch&) = delete;
  HostedCodeWatch& operator=(const HostedCodeWatch&) = delete;

  // Adds the calling thread to those interrupted once stopping.
  void watch_this_thread();

 private:
  void watch();

  std::function<bool()> stopping_;
  std::function<void()> on_stop_;
  std::mutex mutex_;  // guards threads_ and ended_
  std::condition_variable ended_changed_;
  std::vector<std::uint64_t> threads_;
  bool ended_ = false;
  std::thread thread_;  // last: starts once the rest exists
};

}  // namespace tessel
