// How runs that are being stopped stop the user's code that a plugin hosts
// (tessel/plugin.hpp: set_hosted_code_interrupter).
#include <atomic>

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

}  // namespace tessel
