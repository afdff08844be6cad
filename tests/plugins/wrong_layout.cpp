// A plugin whose headers said ABI 5 but laid the public structs out
// differently (a struct changed without a version bump): refused before
// dlopen(), by its layout fingerprint.
#include <cstdlib>

#include <tessel/tessel.hpp>

#include "load_marker.hpp"

namespace {
const LoadMarker marker("wrong_layout");
}  // namespace

extern "C" TESSEL_VISIBLE constinit const tessel::PluginInfo tessel_plugin_info =
    tessel::abi::info_record(tessel::PluginKind::allocation, "wrong_layout", "1.0", "built against other headers",
                             0, tessel::kAbiLayout + 1);
extern "C" TESSEL_VISIBLE tessel::Plugin* tessel_plugin_create(const tessel::PluginContext&,
                                                                    tessel::FactoryError&) noexcept {
  std::abort();  // must never run
}
