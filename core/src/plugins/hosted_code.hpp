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
// whatever may compose plugins, which imports a Python policy's module and
// constructs it, or run them: a sweep's runs, `validate`, `plugins --python`
// and `serve`'s daemon.
class HostedCodeWatch {
 public:
  explicit HostedCodeWatch(std::function<bool()> stopping, std::function<void()> on_stop = {});
  ~HostedCodeWatch();
  HostedCodeWatch(const HostedCodeWatch&) = delete;
  HostedCodeWatch& operator=(const HostedCodeWatch&) = delete;

  // The calling thread is among those interrupted while this lives, and
  // forgotten when it ends: a later thread may take its id.
  class Watching {
   public:
    ~Watching() { watch_.forget(thread_); }
    Watching(const Watching&) = delete;
    Watching& operator=(const Watching&) = delete;

   private:
    friend class HostedCodeWatch;
    Watching(HostedCodeWatch& watch, std::uint64_t thread) : watch_(watch), thread_(thread) {}
    HostedCodeWatch& watch_;
    std::uint64_t thread_;
  };
  [[nodiscard]] Watching watch_this_thread();

 private:
  void watch();
  void forget(std::uint64_t thread);

  std::function<bool()> stopping_;
  std::function<void()> on_stop_;
  std::mutex mutex_;  // guards threads_ and ended_
  std::condition_variable ending_;  // the watch ends: its thread stops polling at once
  std::vector<std::uint64_t> threads_;
  bool ended_ = false;
  std::thread thread_;  // last: starts once the rest exists
};

}  // namespace tessel
