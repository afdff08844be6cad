// A record whose name fills its array with no NUL: refused as malformed
// before dlopen().
#include <algorithm>
#include <cstdlib>

#include <tessel/tessel.hpp>

#include "load_marker.hpp"

namespace {
const LoadMarker marker("unterminated_name");

consteval tessel::PluginInfo unterminated() {
  tessel::PluginInfo info = tessel::abi::info_record(tessel::PluginKind::allocation, "", "1.0",
                                                     "a name with no end", 0, tessel::kAbiLayout);
  std::fill(std::begin(info.name), std::end(info.name), 'x');
  return info;
}
}  // namespace

extern "C" TESSEL_VISIBLE constinit const tessel::PluginInfo tessel_plugin_info = unterminated();
extern "C" TESSEL_VISIBLE tessel::Plugin* tessel_plugin_create(const tessel::PluginContext&,
                                                                    tessel::FactoryError&) noexcept {
  std::abort();  // must never run
}
