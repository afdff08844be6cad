// A record initialised by code at load time rather than at compile time: the
// file holds no bytes of it (.bss), so it cannot be checked before
// dlopen(), and is refused.
#include <cstdlib>

#include <tessel/tessel.hpp>

#include "load_marker.hpp"

namespace {
const LoadMarker marker("runtime_record");

tessel::PluginInfo computed_at_load() {  // not constexpr: runs as a static constructor
  return tessel::abi::info_record(tessel::PluginKind::allocation, "runtime_record", "1.0", "computed at load", 0,
                                  tessel::kAbiLayout);
}
}  // namespace

extern "C" TESSEL_VISIBLE const tessel::PluginInfo tessel_plugin_info = computed_at_load();
extern "C" TESSEL_VISIBLE tessel::Plugin* tessel_plugin_create(const tessel::PluginContext&,
                                                                    tessel::FactoryError&) noexcept {
  std::abort();  // must never run
}
