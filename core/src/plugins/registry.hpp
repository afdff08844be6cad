// Finding, checking and opening plugin libraries.
//
// Search order: the directories in [scheduler] plugin_path, then
// TESSEL_PLUGIN_PATH (colon-separated), then the build tree, then the
// installed plugin directory (installed_plugin_dir()). A stage may also name a library file with
// `path`. The first plugin found for a (kind, name) wins.
//
// A file is checked before any of its code runs: its ELF export table must
// hold the tessel symbols (else "not a tessel plugin"); then the library is
// opened and its info record read, and an ABI mismatch or a missing factory
// is refused before the factory is ever called. Failures are typed (LoadError).
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <boost/dll/shared_library.hpp>

#include "engine/errors.hpp"
#include "tessel/plugin.hpp"

namespace tessel {

enum class LoadError {
  not_found,        // no plugin of that kind and name on the search path
  not_a_plugin,     // not a shared library, or it exports no tessel info record
  unloadable,       // the dynamic loader refused it (missing symbols, ...)
  abi_mismatch,     // built against another tessel plugin ABI
  wrong_kind,       // a plugin of another stage
  missing_factory,  // has an info record but no factory
  factory_threw,    // the factory (plugin constructor) failed
};

std::string_view describe(LoadError error);

// tessel/plugins beside the libtessel this process loaded: where an install
// (system-wide, or in a Python wheel) keeps its plugins.
std::string installed_plugin_dir();

class PluginLoadError : public UserError {
 public:
  PluginLoadError(LoadError code, std::string message)
      : UserError(std::move(message)), code_(code) {}
  LoadError code() const { return code_; }

 private:
  LoadError code_;
};

// Destroys a plugin object, then lets its library go: the object's code must
// outlive the object.
struct PluginDeleter {
  std::shared_ptr<boost::dll::shared_library> library;
  void operator()(Plugin* plugin) const { delete plugin; }
};

template <class Stage>
using PluginPtr = std::unique_ptr<Stage, PluginDeleter>;

struct PluginEntry {
  const PluginInfo* info = nullptr;  // points into `library`
  std::string path;
  std::shared_ptr<boost::dll::shared_library> library;
  PluginFactory factory = nullptr;
  // Only for plugins that host code declaring further arguments (plugin.hpp).
  ArgumentDeclarer declare_arguments = nullptr;
};

struct RejectedFile {
  std::string path;
  LoadError error;
  std::string message;
};

// Safe to share between threads (a sweep's simulations look plugins up concurrently).
class PluginRegistry {
 public:
  explicit PluginRegistry(std::vector<std::string> extra_directories = {});

  const std::vector<std::string>& search_path() const { return search_path_; }

  // Every plugin on the search path, and the files that looked like plugins
  // but were refused.
  const std::deque<PluginEntry>& plugins();
  const std::vector<RejectedFile>& rejected();

  // Throws PluginLoadError: not_found (listing the valid names) or wrong_kind.
  const PluginEntry& find(PluginKind kind, std::string_view name);
  // Opens one library file as a plugin of `kind`. Throws PluginLoadError.
  const PluginEntry& open(const std::string& path, PluginKind kind);

  // Checks one file; throws PluginLoadError.
  static PluginEntry inspect(const std::string& path);

  // Calls the factory; throws PluginLoadError(factory_threw) or, when the
  // plugin blamed an argument, ArgumentError.
  static PluginPtr<Plugin> create(const PluginEntry& entry, const PluginContext& context);

 private:
  void scan();

  std::vector<std::string> search_path_;
  std::recursive_mutex mutex_;
  bool scanned_ = false;
  std::deque<PluginEntry> plugins_;
  std::deque<PluginEntry> opened_;  // explicit files
  std::vector<RejectedFile> rejected_;
};

}  // namespace tessel
