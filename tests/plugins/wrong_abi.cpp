// A plugin built against a different plugin ABI: the loader must refuse it
// before dlopen(), so that neither its static constructor nor its factory runs.
#include <cstdlib>

#include <tessel/tessel.hpp>

#include "load_marker.hpp"

namespace {
const LoadMarker marker("wrong_abi");

consteval tessel::PluginInfo next_abi() {
  tessel::PluginInfo info = tessel::abi::info_record(tessel::PluginKind::allocation, "wrong_abi", "1.0",
                                                     "built for the next ABI", 0, tessel::kAbiLayout);
  info.abi_version = tessel::kAbiVersion + 1;
  return info;
}
}  // namespace

extern "C" TESSEL_VISIBLE constinit const tessel::PluginInfo tessel_plugin_info = next_abi();
extern "C" TESSEL_VISIBLE tessel::Plugin* tessel_plugin_create(const tessel::PluginContext&,
                                                                    tessel::FactoryError&) noexcept {
  std::abort();  // must never run
}
