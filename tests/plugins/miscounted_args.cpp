// A record that counts more argument records than the library holds:
// refused as malformed before dlopen().
#include <array>
#include <cstdlib>

#include <tessel/tessel.hpp>

#include "load_marker.hpp"

namespace {
const LoadMarker marker("miscounted_args");
constexpr tessel::ArgSpec kArgs[] = {{"limit", tessel::ArgType::integer, "1", "a limit"}};
}  // namespace

extern "C" TESSEL_VISIBLE constinit const std::array<tessel::ArgRecord, 1> tessel_plugin_args =
    tessel::abi::arg_records(kArgs);
extern "C" TESSEL_VISIBLE constinit const tessel::PluginInfo tessel_plugin_info =
    tessel::abi::info_record(tessel::PluginKind::allocation, "miscounted_args", "1.0", "counts two arguments", 2,
                             tessel::kAbiLayout);
extern "C" TESSEL_VISIBLE tessel::Plugin* tessel_plugin_create(const tessel::PluginContext&,
                                                                    tessel::FactoryError&) noexcept {
  std::abort();  // must never run
}
