#include "plugins/registry.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "build_config.hpp"
#include "plugins/elf_reader.hpp"
#include "tessel/abi_layout.hpp"

namespace tessel {

namespace fs = std::filesystem;

std::string_view describe(LoadError error) {
  switch (error) {
    case LoadError::not_found: return "plugin not found";
    case LoadError::not_a_plugin: return "not a tessel plugin";
    case LoadError::unloadable: return "library cannot be loaded";
    case LoadError::abi_mismatch: return "plugin ABI mismatch";
    case LoadError::bad_record: return "malformed plugin record";
    case LoadError::wrong_kind: return "plugin of the wrong kind";
    case LoadError::missing_factory: return "plugin has no factory";
    case LoadError::factory_threw: return "plugin factory failed";
    case LoadError::duplicate_name: return "plugin defined more than once";
    case LoadError::misnamed: return "plugin file not named after its plugin";
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

#if defined(__x86_64__)
constexpr std::uint16_t kThisMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr std::uint16_t kThisMachine = EM_AARCH64;
#else
#error "tessel's plugin loader does not know this machine's ELF code"
#endif

// A text field of a record: it must end within its array.
template <std::size_t N>
std::string text_of(const char (&field)[N], const std::string& path, const std::string& what) {
  const void* end = std::memchr(field, '\0', N);
  if (end == nullptr)
    fail(LoadError::bad_record, path, what + " is not NUL-terminated within its " + std::to_string(N) + " characters");
  return std::string(field, static_cast<const char*>(end));
}

std::string hex(std::uint64_t value) {
  std::ostringstream out;
  out << std::hex << value;
  return out.str();
}

// The info record, from the file; checks the ABI version and layout first,
// since a record of another ABI may be laid out differently.
PluginInfo read_info(const ElfFile& elf, const ElfFile::Symbol& symbol, const std::string& path) {
  std::vector<std::byte> bytes;
  try {
    bytes = elf.bytes_of(symbol);
  } catch (const ElfError& e) {
    fail(LoadError::bad_record, path, std::string("its tessel_plugin_info ") + e.what());
  }
  if (bytes.size() == sizeof(void*))
    fail(LoadError::abi_mismatch, path,
         "built for plugin ABI 4 or older (its tessel_plugin_info is a pointer), this tessel uses ABI " +
             std::to_string(kAbiVersion) + "; rebuild it against this tessel");
  std::uint32_t abi_version = 0;
  if (bytes.size() >= sizeof abi_version) std::memcpy(&abi_version, bytes.data(), sizeof abi_version);
  if (abi_version != kAbiVersion)
    fail(LoadError::abi_mismatch, path,
         "built for plugin ABI " + std::to_string(abi_version) + ", this tessel uses ABI " +
             std::to_string(kAbiVersion) + "; rebuild it against this tessel");
  if (bytes.size() != sizeof(PluginInfo))
    fail(LoadError::bad_record, path,
         "its tessel_plugin_info holds " + std::to_string(bytes.size()) + " bytes, not the " +
             std::to_string(sizeof(PluginInfo)) + " of an ABI " + std::to_string(kAbiVersion) + " record");
  PluginInfo info;
  std::memcpy(&info, bytes.data(), sizeof info);
  if (info.layout != kAbiLayout)
    fail(LoadError::abi_mismatch, path,
         "built against tessel headers whose public structs are laid out differently (layout " + hex(info.layout) +
             ", this tessel's " + hex(kAbiLayout) + "), although both say ABI " + std::to_string(kAbiVersion) +
             "; rebuild it against this tessel");
  const std::string name = text_of(info.name, path, "its name");
  text_of(info.version, path, "its version");
  text_of(info.description, path, "its description");
  if (name.empty()) fail(LoadError::bad_record, path, "its name is empty");
  const auto kind = static_cast<std::uint32_t>(info.kind);
  if (kind < 1 || kind > 4)
    fail(LoadError::bad_record, path, "its info record names unknown stage " + std::to_string(kind));
  return info;
}

// Its own argument schema, from tessel_plugin_args.
std::vector<ArgDeclaration> read_arguments(const ElfFile& elf, const PluginInfo& info, const std::string& path) {
  const auto symbol = elf.exported("tessel_plugin_args");
  std::vector<std::byte> bytes;
  if (symbol) {
    try {
      bytes = elf.bytes_of(*symbol);
    } catch (const ElfError& e) {
      fail(LoadError::bad_record, path, std::string("its tessel_plugin_args ") + e.what());
    }
  }
  if (bytes.size() % sizeof(ArgRecord) != 0 || bytes.size() / sizeof(ArgRecord) != info.arg_count)
    fail(LoadError::bad_record, path,
         "its info record counts " + std::to_string(info.arg_count) + " arguments, but its tessel_plugin_args holds " +
             std::to_string(bytes.size()) + " bytes (" + std::to_string(sizeof(ArgRecord)) + " an argument)");
  std::vector<ArgDeclaration> out;
  for (std::size_t i = 0; i < info.arg_count; ++i) {
    ArgRecord record;
    std::memcpy(&record, bytes.data() + i * sizeof record, sizeof record);
    const std::string which = "argument " + std::to_string(i + 1) + "'s ";
    ArgDeclaration declaration;
    declaration.name = text_of(record.name, path, which + "name");
    if (declaration.name.empty()) fail(LoadError::bad_record, path, which + "name is empty");
    if (static_cast<std::uint32_t>(record.type) > static_cast<std::uint32_t>(ArgType::number_table))
      fail(LoadError::bad_record, path,
           which + "type is unknown: " + std::to_string(static_cast<std::uint32_t>(record.type)));
    declaration.type = record.type;
    if (record.has_default > 1) fail(LoadError::bad_record, path, which + "has_default is neither 0 nor 1");
    const std::string default_value = text_of(record.default_value, path, which + "default");
    if (record.has_default == 1) declaration.default_value = default_value;
    declaration.help = text_of(record.help, path, which + "help");
    declaration.choices = text_of(record.choices, path, which + "choices");
    out.push_back(std::move(declaration));
  }
  return out;
}

// Identifies a file however it was reached (two search directories, a link).
std::optional<std::pair<dev_t, ino_t>> identity_of(const std::string& path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) return std::nullopt;
  return std::pair(status.st_dev, status.st_ino);
}

}  // namespace

PluginRegistry::PluginRegistry(std::vector<std::string> extra_directories)
    : search_path_(std::move(extra_directories)) {
  if (const char* env = std::getenv("TESSEL_PLUGIN_PATH")) {
    std::istringstream dirs(env);
    for (std::string dir; std::getline(dirs, dir, ':');)
      if (!dir.empty()) search_path_.push_back(dir);
  }
  search_path_.push_back(own_plugin_dir());
}

namespace {
// The directory of the libtessel this process loaded, or empty.
fs::path this_library_dir() {
  Dl_info library{};
  if (dladdr(reinterpret_cast<void*>(&this_library_dir), &library) == 0 || library.dli_fname == nullptr) return {};
  return fs::path(library.dli_fname).parent_path();
}
}  // namespace

std::string own_file(std::string_view in_build_tree, std::string_view beside) {
  // One or the other, never both: an installed tessel whose build tree still
  // exists would otherwise find every plugin twice, under the same names,
  // and a build-tree tessel would mix in plugins built from older sources.
  // Found from where libtessel itself is, not from the install prefix, so
  // that a relocated install (a Python wheel) finds its own files.
  const fs::path dir = this_library_dir();
  if (dir.empty()) return {};
  std::error_code ec;
  if (fs::equivalent(dir, kBuildLibraryDir, ec)) return std::string(in_build_tree);
  return (dir / beside).string();
}

std::string own_plugin_dir() { return own_file(kBuildPluginDir, kPluginSubdir); }

namespace {

// 1. The records, read from the file: nothing of the library runs.
// `declares` tells whether the file itself exports an argument declarer.
PluginEntry read_records(const std::string& path, bool& declares) {
  std::optional<ElfFile> elf;
  try {
    elf.emplace(path);
  } catch (const ElfError& e) {
    fail(LoadError::not_a_plugin, path, std::string("not a readable shared library: ") + e.what());
  }
  const auto info_symbol = elf->exported("tessel_plugin_info");
  if (!info_symbol || info_symbol->function)
    fail(LoadError::not_a_plugin, path, "exports no tessel_plugin_info record (use TESSEL_PLUGIN)");
  PluginEntry entry;
  entry.path = path;
  entry.info = read_info(*elf, *info_symbol, path);
  entry.arguments = read_arguments(*elf, entry.info, path);
  const auto factory = elf->exported("tessel_plugin_create");
  if (!factory || !factory->function)
    fail(LoadError::missing_factory, path,
         "plugin '" + std::string(entry.info.name) + "' exports no tessel_plugin_create");
  const auto declarer = elf->exported("tessel_plugin_arguments");
  if (declarer && !declarer->function)
    fail(LoadError::bad_record, path, "its tessel_plugin_arguments is not a function");
  if (elf->machine() != kThisMachine)
    fail(LoadError::unloadable, path,
         "built for another machine (ELF machine " + std::to_string(elf->machine()) + ", this one is " +
             std::to_string(kThisMachine) + ")");
  declares = declarer.has_value();
  return entry;
}

// 2. Checked: only now is it opened (its static constructors run) and its
// functions taken.
void open_library(PluginEntry& entry, bool declares) {
  try {
    entry.library = std::make_shared<boost::dll::shared_library>(entry.path);
  } catch (const std::exception& e) {
    fail(LoadError::unloadable, entry.path, e.what());
  }
  entry.factory = reinterpret_cast<PluginFactory>(dlsym(entry.library->native(), "tessel_plugin_create"));
  if (entry.factory == nullptr)
    fail(LoadError::missing_factory, entry.path,
         "plugin '" + std::string(entry.info.name) + "' exports no tessel_plugin_create");
  if (declares)
    entry.declare_arguments =
        reinterpret_cast<ArgumentDeclarer>(dlsym(entry.library->native(), "tessel_plugin_arguments"));
}

}  // namespace

PluginEntry PluginRegistry::inspect(const std::string& path) {
  bool declares = false;
  PluginEntry entry = read_records(path, declares);
  open_library(entry, declares);
  return entry;
}

const std::vector<std::string>& PluginRegistry::files() {
  if (files_) return *files_;
  files_.emplace();
  for (const std::string& dir : search_path_) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<std::string> here;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it.depth() == 1) it.disable_recursion_pending();  // a directory and its subdirectories, no deeper
      if (it->is_regular_file(ec) && it->path().extension() == ".so") here.push_back(it->path().string());
    }
    std::sort(here.begin(), here.end());
    files_->insert(files_->end(), here.begin(), here.end());
  }
  return *files_;
}

const PluginRegistry::FileRecords* PluginRegistry::read(const std::string& path) {
  // The same file through two directories (a directory named twice, a
  // link) is one file, read once, known by the path it was first reached by.
  const auto identity = identity_of(path);
  if (!identity) return nullptr;
  if (const auto known = read_.find(*identity); known != read_.end()) return &known->second;
  FileRecords& records = read_[*identity];
  records.path = path;
  try {
    bool declares = false;
    PluginEntry entry = read_records(path, declares);
    const std::string stem = fs::path(path).stem().string();
    if (stem != entry.info.name)
      fail(LoadError::misnamed, path,
           "it defines " + std::string(to_string(entry.info.kind)) + " plugin '" + entry.info.name +
               "', so it must be called " + entry.info.name + ".so to be found by that name (or be named with `path`)");
    found_.push_back({std::move(entry), declares, std::nullopt});
    records.plugin = &found_.back();
  } catch (const PluginLoadError& e) {
    // Ordinary shared libraries may sit beside plugins; only files that
    // claim to be plugins are refused.
    if (e.code() != LoadError::not_a_plugin) records.refused = RejectedFile{path, e.code(), e.what()};
  }
  return &records;
}

namespace {
std::string defined_twice(PluginKind kind, std::string_view name, const std::vector<std::string>& paths) {
  std::string files;
  for (std::size_t i = 0; i < paths.size(); ++i)
    files += (i == 0 ? "" : i + 1 == paths.size() ? " and " : ", ") + paths[i];
  return std::string(to_string(kind)) + " plugin '" + std::string(name) + "' is defined by " +
         std::to_string(paths.size()) + " files: " + files + "; remove all but one, or name one with `path`";
}
}  // namespace

void PluginRegistry::open_all() {
  std::lock_guard lock(mutex_);
  if (opened_all_) return;
  opened_all_ = true;
  // Every file, in search order, so that the refusals read in that order.
  std::vector<const FileRecords*> each;
  std::set<const FileRecords*> seen;
  for (const std::string& file : files())
    if (const FileRecords* records = read(file); records && seen.insert(records).second) each.push_back(records);
  // Two files defining one (kind, name): neither is used, since which one a
  // run got would depend on the search path's order. Their records say so,
  // whether or not either would open.
  std::map<std::pair<PluginKind, std::string_view>, std::vector<std::string>> paths_by_name;
  for (const FileRecords* records : each)
    if (const Found* found = records->plugin) paths_by_name[{found->entry.info.kind, found->entry.info.name}].push_back(records->path);
  for (const FileRecords* records : each) {
    if (records->refused) {
      rejected_.push_back(*records->refused);
      continue;
    }
    if (!records->plugin) continue;
    Found& found = *records->plugin;
    const auto& paths = paths_by_name[{found.entry.info.kind, found.entry.info.name}];
    if (paths.size() > 1) {
      if (paths.front() == records->path)
        rejected_.push_back({records->path, LoadError::duplicate_name,
                             std::string(describe(LoadError::duplicate_name)) + ": " +
                                 defined_twice(found.entry.info.kind, found.entry.info.name, paths)});
      continue;
    }
    try {
      plugins_.push_back(opened(found));
    } catch (const PluginLoadError&) {
      rejected_.push_back(*found.refused);
    }
  }
}

const PluginEntry& PluginRegistry::opened(Found& found) {
  if (found.refused) throw PluginLoadError(found.refused->error, found.refused->message);
  if (!found.entry.library) {
    try {
      open_library(found.entry, found.declares_arguments);
    } catch (const PluginLoadError& e) {
      found.refused = RejectedFile{found.entry.path, e.code(), e.what()};
      throw;
    }
  }
  return found.entry;
}

const std::deque<PluginEntry>& PluginRegistry::plugins() {
  open_all();
  return plugins_;
}

const std::vector<RejectedFile>& PluginRegistry::rejected() {
  open_all();
  return rejected_;
}

const PluginEntry& PluginRegistry::find(PluginKind kind, std::string_view name) {
  std::lock_guard lock(mutex_);
  // Only the files called <name>.so are read: a plugin's file is named after it.
  const std::string file_name = std::string(name) + ".so";
  std::vector<const FileRecords*> candidates;
  for (const std::string& file : files())
    if (fs::path(file).filename() == file_name)
      if (const FileRecords* records = read(file);
          records && std::find(candidates.begin(), candidates.end(), records) == candidates.end())
        candidates.push_back(records);
  std::vector<const FileRecords*> of_kind;
  const FileRecords* of_another_kind = nullptr;
  const FileRecords* refused = nullptr;
  for (const FileRecords* records : candidates) {
    if (records->refused && !refused) refused = records;
    if (!records->plugin) continue;
    if (records->plugin->entry.info.kind == kind)
      of_kind.push_back(records);
    else
      of_another_kind = records;
  }
  if (of_kind.size() > 1) {
    std::vector<std::string> paths;
    for (const FileRecords* records : of_kind) paths.push_back(records->path);
    throw PluginLoadError(LoadError::duplicate_name, defined_twice(kind, name, paths));
  }
  if (of_kind.size() == 1) return opened(*of_kind.front()->plugin);
  // A file of that name that could not be read is the likeliest answer,
  // ahead of one of another stage (each stage has its own python.so).
  if (refused) throw PluginLoadError(refused->refused->error, refused->refused->message);
  if (of_another_kind)
    throw PluginLoadError(LoadError::wrong_kind, "'" + std::string(name) + "' is " +
                                                     plugin_noun(of_another_kind->plugin->entry.info.kind) +
                                                     ", not " + plugin_noun(kind));
  // The error path: the valid names are those that open, with every refusal
  // noted (a file defining this name under another file name among them),
  // as `tessel plugins` lists them.
  open_all();
  std::vector<std::string> valid;
  for (const PluginEntry& entry : plugins_)
    if (entry.info.kind == kind) valid.emplace_back(entry.info.name);
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
      if (entry.info.kind != kind) break;
      return entry;
    }
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(LoadError::not_found, path, "no such file");
  PluginEntry entry = inspect(path);
  if (entry.info.kind != kind)
    fail(LoadError::wrong_kind, path,
         "'" + std::string(entry.info.name) + "' is " + plugin_noun(entry.info.kind) + ", not " +
             plugin_noun(kind));
  opened_.push_back(std::move(entry));
  return opened_.back();
}

std::string interrupted_loading(const PluginInfo& plugin, const FactoryError& error) {
  return "interrupted while " + std::string(to_string(plugin.kind)) + " plugin '" + plugin.name + "' loaded" +
         (error.message.empty() ? "" : " (in " + error.message + ")");
}

PluginPtr<Plugin> PluginRegistry::create(const PluginEntry& entry, const PluginContext& context) {
  FactoryError error;
  Plugin* plugin = entry.factory(context, error);
  if (plugin == nullptr) {
    if (error.interrupted) throw Interrupted(interrupted_loading(entry.info, error));
    if (!error.argument.empty()) throw ArgumentError(error.argument, error.message);
    fail(LoadError::factory_threw, entry.path,
         std::string(to_string(entry.info.kind)) + " plugin '" + entry.info.name +
             "': " + (error.message.empty() ? "returned nothing" : error.message));
  }
  return PluginPtr<Plugin>(plugin, PluginDeleter{entry.library});
}

}  // namespace tessel
