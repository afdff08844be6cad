// The executable's side of the real-node commands (cluster_commands.hpp):
// each opens libtessel_nodes.so on first use, checks what it exports, and
// runs the command there. The library is found as the plugins are
// (own_file): the build tree's for the build tree's libtessel, else the one
// installed beside the libtessel this process loaded (a system install or a
// wheel).
#include <dlfcn.h>

#include <filesystem>
#include <iostream>

#include "build_config.hpp"
#include "cluster_commands.hpp"
#include "plugins/registry.hpp"

namespace tessel::cli {

namespace {

const NodesCommands* opened = nullptr;

// Prints why, and returns null: the command then exits 1, an installation's
// fault, not the user's.
const NodesCommands* refuse(const std::string& why) {
  std::cerr << "tessel: " << why << "\n";
  return nullptr;
}

const NodesCommands* nodes_commands() {
  if (opened != nullptr) return opened;
  const std::string found = own_file(kBuildNodesLibrary, kNodesLibrary);
  if (found.empty())
    return refuse("cannot find where libtessel.so was loaded from, so not the real-node commands' library either");
  // Without the RUNPATH's "..": the file is named in errors.
  std::error_code ec;
  std::string file = std::filesystem::weakly_canonical(found, ec).string();
  if (ec) file = found;
  void* library = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr)
    return refuse("cannot load " + file + ", which serve, agent and the client commands need: " + dlerror());
  // Never closed: a command's threads and OpenSSL's exit handlers need it
  // until the process ends.
  using Entry = const NodesCommands* (*)();
  const auto entry = reinterpret_cast<Entry>(dlsym(library, kNodesEntryPoint));
  if (entry == nullptr)
    return refuse(file + " is not tessel's real-node commands' library: " + dlerror());
  const NodesCommands* commands = entry();
  // The size and layout are read only once the version agrees: a table of
  // another version may be laid out differently.
  if (commands == nullptr || commands->interface != kNodesInterface)
    return refuse(file + " is from another tessel build: interface " +
                  (commands == nullptr ? std::string("none") : std::to_string(commands->interface)) +
                  ", this tessel uses " + std::to_string(kNodesInterface) + "; rebuild or reinstall tessel");
  if (commands->size != sizeof(NodesCommands) || commands->layout != nodes_layout())
    return refuse(file + " is from another tessel build: its options are laid out differently (" +
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

int serve(const ServeOptions& options, const std::atomic<bool>& stop) {
  return call<&NodesCommands::serve>(options, stop);
}
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
