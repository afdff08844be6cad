// A plugin as ABI 4 and older exported it: tessel_plugin_info a pointer to a
// record (which held pointers itself). Refused as another ABI before dlopen().
#include <cstdint>
#include <cstdlib>

#include <tessel/tessel.hpp>

#include "load_marker.hpp"

namespace {
const LoadMarker marker("old_abi");

struct OldRecord {
  std::uint32_t abi_version;
  std::uint32_t kind;
  const char* name;
};
const OldRecord record = {4, 2, "old_abi"};
}  // namespace

extern "C" TESSEL_VISIBLE const void* const tessel_plugin_info = &record;
extern "C" TESSEL_VISIBLE tessel::Plugin* tessel_plugin_create(const tessel::PluginContext&,
                                                                    tessel::FactoryError&) noexcept {
  std::abort();  // must never run
}
