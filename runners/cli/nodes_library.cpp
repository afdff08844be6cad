// The executable's side of the real-node commands (cluster_commands.hpp):
// each opens libtessel_nodes.so on first use, checks what it exports, and
// runs the command there. The library is found as the plugins are: the
// build tree's beside the build tree's libtessel, else the one installed
// beside the libtessel this process loaded (a system install or a wheel).
#include <dlfcn.h>
#include <link.h>

#include <filesystem>
#include <iostream>

#include "build_config.hpp"
#include "cluster_commands.hpp"

namespace tessel::cli {

namespace fs = std::filesystem;

namespace {

const NodesCommands* opened = nullptr;

// The libtessel this process loaded, as the dynamic loader found it; asked
// of the loader by name rather than by a function's address, which a
// non-PIE executable would resolve to its own PLT.
fs::path libtessel_path() {
  void* handle = dlopen("libtessel.so", RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return {};
  link_map* map = nullptr;
  const bool found = dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr;
  fs::path path = found ? fs::path(map->l_name) : fs::path();
  dlclose(handle);  // only drops the reference RTLD_NOLOAD took
  return path;
}

// Prints why, and returns null: the command then exits 1, an installation's
// fault, not the user's.
const NodesCommands* refuse(const std::string& why) {
  std::cerr << "tessel: " << why << "\n";
  return nullptr;
}

const NodesCommands* nodes_commands() {
  if (opened != nullptr) return opened;
  const fs::path libtessel = libtessel_path();
  if (libtessel.empty())
    return refuse("cannot find where libtessel.so was loaded from, so not the real-node commands' library either");
  std::error_code ec;
  // Without the RUNPATH's "..": the file is named in errors.
  fs::path dir = fs::weakly_canonical(libtessel.parent_path(), ec);
  if (ec) dir = libtessel.parent_path();
  const fs::path file = fs::equivalent(dir, kBuildLibraryDir, ec) ? fs::path(kBuildNodesLibrary) : dir / kNodesLibrary;
  void* library = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr)
    return refuse("cannot load " + file.string() + ", which serve, agent and the client commands need: " + dlerror());
  // Never closed: a command's threads and OpenSSL's exit handlers need it
  // until the process ends.
  using Entry = const NodesCommands* (*)();
  const auto entry = reinterpret_cast<Entry>(dlsym(library, kNodesEntryPoint));
  if (entry == nullptr)
    return refuse(file.string() + " is not tessel's real-node commands' library: " + dlerror());
  const NodesCommands* commands = entry();
  // The size and layout are read only once the version agrees: a table of
  // another version may be laid out differently.
  if (commands == nullptr || commands->interface != kNodesInterface)
    return refuse(file.string() + " is from another tessel build: interface " +
                  (commands == nullptr ? std::string("none") : std::to_string(commands->interface)) +
                  ", this tessel uses " + std::to_string(kNodesInterface) + "; rebuild or reinstall tessel");
  if (commands->size != sizeof(NodesCommands) || commands->layout != nodes_layout())
    return refuse(file.string() + " is from another tessel build: its options are laid out differently (" +
                  std::to_string(commands->size) + " bytes of table, layout " + std::to_string(commands->layout) +
                  "; this tessel: " + std::to_string(sizeof(NodesCommands)) + ", " + std::to_string(nodes_layout()) +
                  "); rebuild or reinstall tessel");
  opened = commands;
  return opened;
}

// Runs one of the library's commands; 1 when the library cannot be used.
template <auto command, typename... Args>
int call(const Args&... args) {
  const NodesCommands* commands = nodes_commands();
  return commands == nullptr ? 1 : (commands->*command)(args...);
}

}  // namespace

std::string message_prefix() { return opened == nullptr ? "tessel: " : opened->message_prefix(); }

int serve(const ServeOptions& options) { return call<&NodesCommands::serve>(options); }
int agent(const AgentCommandOptions& options) { return call<&NodesCommands::agent>(options); }
int submit(const ClientOptions& client, const SubmitOptions& options) {
  return call<&NodesCommands::submit>(client, options);
}
int jobs(const ClientOptions& client, const std::string& format) { return call<&NodesCommands::jobs>(client, format); }
int cancel(const ClientOptions& client, std::uint32_t job) { return call<&NodesCommands::cancel>(client, job); }
int status(const ClientOptions& client) { return call<&NodesCommands::status>(client); }
int logs(const ClientOptions& client, const LogsOptions& options) { return call<&NodesCommands::logs>(client, options); }
int progress(std::int64_t iteration, std::int64_t total) {
  return call<&NodesCommands::progress>(iteration, total);
}

}  // namespace tessel::cli
