#include <vector>  // boost::dll::library_info needs it first

#include "plugins/registry.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <boost/dll/library_info.hpp>

#include "build_config.hpp"

namespace tessel {

namespace fs = std::filesystem;

std::string_view describe(LoadError error) {
  switch (error) {
    case LoadError::not_found: return "plugin not found";
    case LoadError::not_a_plugin: return "not a tessel plugin";
    case LoadError::unloadable: return "library cannot be loaded";
    case LoadError::abi_mismatch: return "plugin ABI mismatch";
    case LoadError::wrong_kind: return "plugin of the wrong kind";
    case LoadError::missing_factory: return "plugin has no factory";
    case LoadError::factory_threw: return "plugin factory failed";
  }
  return "?";
}

namespace {

[[noreturn]] void fail(LoadError code, const std::string& path, const std::string& detail) {
  throw PluginLoadError(code, path + ": " + std::string(describe(code)) + ": " + detail);
}

// "an allocation plugin", "a placement plugin"
std::string plugin_noun(PluginKind kind) {
  const std::string_view name = to_string(kind);
  return std::string(name.front() == 'p' ? "a " : "an ") + std::string(name) + " plugin";
}

bool exports(const std::vector<std::string>& symbols, std::string_view name) {
  return std::find(symbols.begin(), symbols.end(), name) != symbols.end();
}

}  // namespace

PluginRegistry::PluginRegistry(std::vector<std::string> extra_directories)
    : search_path_(std::move(extra_directories)) {
  if (const char* env = std::getenv("TESSEL_PLUGIN_PATH")) {
    std::istringstream dirs(env);
    for (std::string dir; std::getline(dirs, dir, ':');)
      if (!dir.empty()) search_path_.push_back(dir);
  }
  search_path_.emplace_back(kBuildPluginDir);
  search_path_.push_back(installed_plugin_dir());
}

std::string installed_plugin_dir() {
  // Found from where libtessel itself is, not from the install prefix, so
  // that a relocated install (a Python wheel) finds its own plugins.
  Dl_info library{};
  if (dladdr(reinterpret_cast<void*>(&installed_plugin_dir), &library) == 0 || library.dli_fname == nullptr)
    return {};
  return (fs::path(library.dli_fname).parent_path() / kPluginSubdir).string();
}

PluginEntry PluginRegistry::inspect(const std::string& path) {
  // 1. The export table, read from the file without running any of it.
  std::vector<std::string> symbols;
  try {
    boost::dll::library_info info(path);
    symbols = info.symbols("tessel");
  } catch (const std::exception&) {
    fail(LoadError::not_a_plugin, path, "not a readable shared library");
  }
  if (!exports(symbols, "tessel_plugin_info"))
    fail(LoadError::not_a_plugin, path, "exports no tessel_plugin_info record (use TESSEL_PLUGIN)");

  // 2. Open it and read the info record; no plugin function runs yet.
  PluginEntry entry;
  entry.path = path;
  try {
    entry.library = std::make_shared<boost::dll::shared_library>(path);
  } catch (const std::exception& e) {
    fail(LoadError::unloadable, path, e.what());
  }
  entry.info = static_cast<const PluginInfo*>(entry.library->get<const void*>("tessel_plugin_info"));
  if (entry.info->abi_version != kAbiVersion)
    fail(LoadError::abi_mismatch, path,
         "built for plugin ABI " + std::to_string(entry.info->abi_version) + ", this tessel uses ABI " +
             std::to_string(kAbiVersion) + "; rebuild it against this tessel");
  const auto kind = static_cast<std::uint32_t>(entry.info->kind);
  if (kind < 1 || kind > 4)
    fail(LoadError::not_a_plugin, path, "info record names unknown stage " + std::to_string(kind));
  if (!exports(symbols, "tessel_plugin_create") || !entry.library->has("tessel_plugin_create"))
    fail(LoadError::missing_factory, path,
         "plugin '" + std::string(entry.info->name) + "' exports no tessel_plugin_create");
  entry.factory = reinterpret_cast<PluginFactory>(
      const_cast<void*>(entry.library->get<const void*>("tessel_plugin_create")));
  if (exports(symbols, "tessel_plugin_arguments"))
    entry.declare_arguments = reinterpret_cast<ArgumentDeclarer>(
        const_cast<void*>(entry.library->get<const void*>("tessel_plugin_arguments")));
  return entry;
}

void PluginRegistry::scan() {
  std::lock_guard lock(mutex_);
  if (scanned_) return;
  scanned_ = true;
  for (const std::string& dir : search_path_) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<std::string> files;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it.depth() > 1) it.disable_recursion_pending();
      if (it->is_regular_file(ec) && it->path().extension() == ".so") files.push_back(it->path().string());
    }
    std::sort(files.begin(), files.end());
    for (const std::string& file : files) {
      try {
        PluginEntry entry = inspect(file);
        const bool shadowed = std::any_of(plugins_.begin(), plugins_.end(), [&](const PluginEntry& p) {
          return p.info->kind == entry.info->kind && std::string_view(p.info->name) == entry.info->name;
        });
        if (!shadowed) plugins_.push_back(std::move(entry));
      } catch (const PluginLoadError& e) {
        // Ordinary shared libraries may sit beside plugins; only report files
        // that claim to be plugins.
        if (e.code() != LoadError::not_a_plugin) rejected_.push_back({file, e.code(), e.what()});
      }
    }
  }
}

const std::deque<PluginEntry>& PluginRegistry::plugins() {
  scan();
  return plugins_;
}

const std::vector<RejectedFile>& PluginRegistry::rejected() {
  scan();
  return rejected_;
}

const PluginEntry& PluginRegistry::find(PluginKind kind, std::string_view name) {
  std::lock_guard lock(mutex_);
  scan();
  for (const PluginEntry& entry : plugins_)
    if (entry.info->kind == kind && name == entry.info->name) return entry;
  for (const PluginEntry& entry : plugins_)
    if (name == entry.info->name)
      throw PluginLoadError(LoadError::wrong_kind,
                            "'" + std::string(name) + "' is " + plugin_noun(entry.info->kind) +
                                ", not " + plugin_noun(kind));
  std::vector<std::string> valid;
  for (const PluginEntry& entry : plugins_)
    if (entry.info->kind == kind) valid.emplace_back(entry.info->name);
  std::sort(valid.begin(), valid.end());
  std::string list;
  for (const auto& v : valid) list += (list.empty() ? "" : ", ") + v;
  std::string message = "unknown " + std::string(to_string(kind)) + " plugin '" + std::string(name) +
                        "' (valid: " + (list.empty() ? "none found" : list) + ")";
  for (const RejectedFile& file : rejected_) message += "\n  note: refused " + file.message;
  throw PluginLoadError(LoadError::not_found, message);
}

const PluginEntry& PluginRegistry::open(const std::string& path, PluginKind kind) {
  std::lock_guard lock(mutex_);
  for (const PluginEntry& entry : opened_)
    if (entry.path == path) {
      if (entry.info->kind != kind) break;
      return entry;
    }
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(LoadError::not_found, path, "no such file");
  PluginEntry entry = inspect(path);
  if (entry.info->kind != kind)
    fail(LoadError::wrong_kind, path,
         "'" + std::string(entry.info->name) + "' is " + plugin_noun(entry.info->kind) + ", not " +
             plugin_noun(kind));
  opened_.push_back(std::move(entry));
  return opened_.back();
}

PluginPtr<Plugin> PluginRegistry::create(const PluginEntry& entry, const PluginContext& context) {
  FactoryError error;
  Plugin* plugin = entry.factory(context, error);
  if (plugin == nullptr) {
    if (!error.argument.empty()) throw ArgumentError(error.argument, error.message);
    fail(LoadError::factory_threw, entry.path,
         std::string(to_string(entry.info->kind)) + " plugin '" + entry.info->name +
             "': " + (error.message.empty() ? "returned nothing" : error.message));
  }
  return PluginPtr<Plugin>(plugin, PluginDeleter{entry.library});
}

}  // namespace tessel
