// Finding, checking and opening plugin libraries.
//
// Search order: the directories in [scheduler] plugin_path, then
// TESSEL_PLUGIN_PATH (colon-separated), then the plugins that belong with
// this process's libtessel (own_plugin_dir()), each with its subdirectories.
// A stage may also name a library file with `path`.
//
// A plugin's file is named after it: plugin `fifo` is some `fifo.so` on the
// search path (each stage has its own `python.so`). So looking a plugin up
// reads the records of the files of that name alone, as Slurm finds its
// plugins, instead of every file's (which made every command pay for all of
// them), and a file defining another name is refused (misnamed). Two files
// on the search path that define a plugin of the same kind and name are an
// error naming both, whenever that name is looked up; one file reached
// through two directories is one file.
//
// A file is checked before any of its code runs, static constructors
// included: its info record and argument records are read from the ELF file
// (elf_reader.hpp), and a file without them, an ABI or layout mismatch, a
// malformed record or a missing factory is refused before dlopen(). Only
// then is the library opened and its factory taken. Failures are typed
// (LoadError).
//
// Looking a plugin up opens only the library it returns: opening one runs
// the dynamic loader over it and its dependencies (libpython for the Python
// plugins, GLPK for the LP ones). Listing every plugin (plugins(),
// rejected()) reads and opens them all, and so does the error for an unknown
// name, whose list of valid names holds only plugins that load and whose
// notes name every refused file (one defining that name under another file
// name among them).
#pragma once

#include <sys/types.h>

#include <deque>
#include <map>
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
  misnamed,         // on the search path under another name than its plugin's
};

std::string_view describe(LoadError error);

// What Interrupted says when the user stopped the code a plugin hosts while
// it loaded (its factory or its argument declarer reported `interrupted`).
std::string interrupted_loading(const PluginInfo& plugin, const FactoryError& error);

// A file that belongs with the libtessel this process loaded: `in_build_tree`
// when that library is the build tree's, else `beside` it (a path relative
// to libtessel's directory, in a system install or a Python wheel); empty
// when where libtessel was loaded from cannot be told.
std::string own_file(std::string_view in_build_tree, std::string_view beside);

// The plugins built with the libtessel this process loaded: own_file() of
// the build tree's plugin directory and the installed one.
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
  // What reading one file's records gave: a plugin, a refusal, or neither
  // (an ordinary library beside the plugins).
  struct FileRecords {
    std::string path;  // the first path it was reached by
    Found* plugin = nullptr;  // in found_
    std::optional<RejectedFile> refused;
  };

  // The *.so files on the search path, in its order, sorted within each
  // directory: listed once, nothing read.
  const std::vector<std::string>& files();
  // Reads a file's records once, however many paths reach it; nullptr when
  // it is gone.
  const FileRecords* read(const std::string& path);
  const PluginEntry& opened(Found& found);  // throws PluginLoadError
  void open_all();  // reads and opens every file

  std::vector<std::string> search_path_;
  std::recursive_mutex mutex_;
  std::optional<std::vector<std::string>> files_;
  std::map<std::pair<dev_t, ino_t>, FileRecords> read_;  // by the file's identity
  std::deque<Found> found_;  // never erased from: find() returns references into it
  bool opened_all_ = false;
  std::deque<PluginEntry> plugins_;  // those of found_ that opened and are not defined twice, once open_all() ran
  std::deque<PluginEntry> opened_;  // explicit files
  std::vector<RejectedFile> rejected_;  // once open_all() ran: refusals, in search order, and names defined twice
};

}  // namespace tessel
