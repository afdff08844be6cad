// A plugin built against a different plugin ABI: the loader must refuse it
// before calling its factory.
#include <cstdlib>

#include <tessel/tessel.hpp>

namespace broken {
const tessel::PluginInfo info = {tessel::kAbiVersion + 1, tessel::PluginKind::allocation, "wrong_abi",
                                 "1.0", "built for the next ABI", nullptr, 0};
tessel::Plugin* create(const tessel::PluginContext&, tessel::FactoryError&) noexcept {
  std::abort();  // must never run
}
}  // namespace broken

BOOST_DLL_ALIAS_SECTIONED(broken::info, tessel_plugin_info, tessel)
BOOST_DLL_ALIAS_SECTIONED(broken::create, tessel_plugin_create, tessel)
