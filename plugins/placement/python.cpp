// python: a placement policy written as a Python class. The bridge
// (python/bridge) loads the class from `module` and calls it once per
// stage call; keys after `class` go to its constructor.
#include "bridge.hpp"

TESSEL_PLUGIN_HOSTING(tessel::python::PlacementBridge, placement, "python", "1.0",
                      "a placement policy written as a Python class (module, class)",
                      tessel::python::kBridgeArgs, tessel::python::declare_arguments<tessel::PluginKind::placement>)
