// A plugin that declares itself but exports no factory.
#include <tessel/tessel.hpp>

#include "load_marker.hpp"

namespace {
const LoadMarker marker("missing_factory");
}  // namespace

extern "C" TESSEL_VISIBLE constinit const tessel::PluginInfo tessel_plugin_info =
    tessel::abi::info_record(tessel::PluginKind::allocation, "missing_factory", "1.0", "has no factory", 0,
                             tessel::kAbiLayout);
