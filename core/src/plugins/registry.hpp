// Finding, checking and opening plugin libraries.
//
// Search order: the directories in [scheduler] plugin_path, then
// TESSEL_PLUGIN_PATH (colon-separated), then the plugins that belong with
// this process's libtessel (own_plugin_dir()). A stage may also name a
// library file with `path`. Two files on the search path that define a
// plugin of the same kind and name are an error naming both, whenever that
// name is looked up; one file reached through two directories is one file.
//
// A file is checked before any of its code runs, static constructors
// included: its info record and argument records are read from the ELF file
// (elf_reader.hpp), and a file without them, an ABI or layout mismatch, a
// malformed record or a missing factory is refused before dlopen(). Only
// then is the library opened and its factory taken. Failures are typed
// (LoadError).
//
// Looking a plugin up reads the records of every file on the search path
// (a few small reads each: that is what finds a name defined twice, whatever
// the files are called) but opens only the library it returns: opening one
// runs the dynamic loader over it and its dependencies (libpython for the
// Python plugins, GLPK for the LP ones), which costs more than the records of
// all of them. Listing every plugin (plugins(), rejected()) opens them all,
// and so does the error for an unknown name, whose list of valid names holds
// only plugins that load.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <optional>
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
  unloadable,       // the dynamic loader refused it (missing symbols, another machine, ...)
  abi_mismatch,     // built against another tessel plugin ABI, or headers of another layout
  bad_record,       // its info or argument records are malformed
  wrong_kind,       // a plugin of another stage
  missing_factory,  // has an info record but no factory
  factory_threw,    // the factory (plugin constructor) failed
  duplicate_name,   // two files on the search path define the same plugin
};

std::string_view describe(LoadError error);

// tessel/plugins beside the libtessel this process loaded: where an install
// (system-wide, or in a Python wheel) keeps its plugins.
std::string installed_plugin_dir();

// The plugins built with the libtessel this process loaded: the build tree's
// when that library is the build tree's, else installed_plugin_dir().
std::string own_plugin_dir();

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
  PluginInfo info{};  // as read from the file
  std::vector<ArgDeclaration> arguments;  // its own, from its argument records
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

  // Every plugin on the search path, opened, and the files that looked like
  // plugins but were refused.
  const std::deque<PluginEntry>& plugins();
  const std::vector<RejectedFile>& rejected();

  // Opens the plugin of that kind and name. Throws PluginLoadError:
  // not_found (listing the valid names), wrong_kind, duplicate_name, or why
  // its library could not be opened.
  const PluginEntry& find(PluginKind kind, std::string_view name);
  // Opens one library file as a plugin of `kind`. Throws PluginLoadError.
  const PluginEntry& open(const std::string& path, PluginKind kind);

  // Checks one file and opens it; throws PluginLoadError.
  static PluginEntry inspect(const std::string& path);

  // Calls the factory; throws PluginLoadError(factory_threw) or, when the
  // plugin blamed an argument, ArgumentError.
  static PluginPtr<Plugin> create(const PluginEntry& entry, const PluginContext& context);

 private:
  // A plugin on the search path, known by its records; opened when first
  // looked up (or listed).
  struct Found {
    PluginEntry entry;  // its library empty until opened
    bool declares_arguments = false;  // the file exports tessel_plugin_arguments
    std::optional<RejectedFile> refused;  // why it could not be opened
  };

  void scan();  // reads the records of every file
  const PluginEntry& opened(Found& found);  // throws PluginLoadError
  void open_all();

  std::vector<std::string> search_path_;
  std::recursive_mutex mutex_;
  bool scanned_ = false;
  bool opened_all_ = false;
  std::deque<Found> found_;  // never erased from: find() returns references into it
  std::deque<PluginEntry> plugins_;  // those of found_ that opened, once open_all() ran
  std::deque<PluginEntry> opened_;  // explicit files
  std::vector<RejectedFile> rejected_;  // duplicate names among them, by their first file
  struct Duplicate {
    PluginKind kind;
    std::string name;
    std::string message;
  };
  std::vector<Duplicate> duplicates_;
};

}  // namespace tessel
