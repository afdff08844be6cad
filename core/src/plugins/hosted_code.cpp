// How runs that are being stopped stop the user's code that a plugin hosts
// (tessel/plugin.hpp: set_hosted_code_interrupter; hosted_code.hpp).
#include "plugins/hosted_code.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>

#include "tessel/plugin.hpp"

namespace tessel {

namespace {

std::atomic<void (*)(const std::vector<std::uint64_t>&)> interrupter{nullptr};

}  // namespace

void set_hosted_code_interrupter(void (*interrupt)(const std::vector<std::uint64_t>& threads)) {
  interrupter.store(interrupt);
}

void interrupt_hosted_code(const std::vector<std::uint64_t>& threads) {
  if (auto* interrupt = interrupter.load()) interrupt(threads);
}

HostedCodeWatch::HostedCodeWatch(std::function<bool()> stopping, std::function<void()> on_stop)
    : stopping_(std::move(stopping)), on_stop_(std::move(on_stop)), thread_([this] { watch(); }) {}

HostedCodeWatch::~HostedCodeWatch() {
  {
    std::lock_guard lock(mutex_);
    ended_ = true;
  }
  ending_.notify_all();
  thread_.join();
}

HostedCodeWatch::Watching HostedCodeWatch::watch_this_thread() {
  const auto thread = static_cast<std::uint64_t>(pthread_self());
  std::lock_guard lock(mutex_);
  threads_.push_back(thread);
  return Watching(*this, thread);
}

void HostedCodeWatch::forget(std::uint64_t thread) {
  std::lock_guard lock(mutex_);
  threads_.erase(std::find(threads_.begin(), threads_.end(), thread));
}

void HostedCodeWatch::watch() {
  bool stopped = false;
  std::unique_lock lock(mutex_);
  while (!ended_) {
    if (!stopped && stopping_()) {
      stopped = true;
      if (on_stop_) on_stop_();
    }
    if (stopped) {
      const std::vector<std::uint64_t> threads = threads_;
      lock.unlock();  // the interrupter waits for Python's GIL, which a watched thread may hold
      interrupt_hosted_code(threads);
      lock.lock();
      if (ended_) break;
    }
    ending_.wait_for(lock, std::chrono::milliseconds(20));
  }
}

}  // namespace tessel
