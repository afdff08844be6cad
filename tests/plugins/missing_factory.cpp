// A plugin that declares itself but exports no factory.
#include <tessel/tessel.hpp>

namespace broken {
const tessel::PluginInfo info = {tessel::kAbiVersion, tessel::PluginKind::allocation, "missing_factory",
                                 "1.0", "has no factory", nullptr, 0};
}  // namespace broken

BOOST_DLL_ALIAS_SECTIONED(broken::info, tessel_plugin_info, tessel)
