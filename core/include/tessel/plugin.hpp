// The plugin ABI: what a plugin library exports and how the core creates it.
//
// A plugin library exports, as plain extern "C" symbols:
//   tessel_plugin_info       a PluginInfo record: ABI version, layout
//                            fingerprint, kind, name, version, description
//                            and the number of argument records;
//   tessel_plugin_args       its ArgRecord table (absent when it takes none);
//   tessel_plugin_create     the factory, a PluginFactory.
// A plugin that hosts the user's own code (the Python bridge) may export a
// fourth, whose arguments depend on that code:
//   tessel_plugin_arguments  an ArgumentDeclarer.
// The two records are plain data (fixed-size character arrays and integers,
// no pointers, so no relocations), initialised at compile time: the loader
// reads them straight from the library's ELF file, as libcamera reads its
// module info, and checks the ABI version, the layout, the kind and the
// argument schema before it dlopen()s the library, so that nothing of a
// refused plugin runs, not even its static constructors. Use TESSEL_PLUGIN
// (below) rather than writing these by hand.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "tessel/visibility.hpp"

#include "tessel/slots.hpp"

namespace tessel {

// Bump whenever a public header changes in a way that breaks plugins built
// against the previous one, and update the layout pins in abi_layout.hpp.
// A plugin's record carries the version and the layout fingerprint
// (kAbiLayout) of the headers it was built against; the loader refuses it
// unless both are this tessel's.
inline constexpr std::uint32_t kAbiVersion = 14;

enum class PluginKind : std::uint32_t { admission = 1, allocation = 2, placement = 3, elasticity = 4 };
std::string_view to_string(PluginKind kind);

// number_table is a TOML table of numbers by name: `{ research = 0.6, prod = 0.4 }`.
enum class ArgType : std::uint32_t { boolean, integer, number, string, number_list, string_list, number_table };
std::string_view to_string(ArgType type);

// One declared argument, as a plugin writes it (the macros turn the table
// into ArgRecords at compile time). `default_value` is TOML value syntax
// ("3600", "[3600]", "true", "\"fifo\""); nullptr makes the argument
// required. `choices` lists the allowed strings as "a|b|c" (string arguments
// only), or kClusterGpuTypes. Declare the table constexpr.
struct ArgSpec {
  const char* name;
  ArgType type;
  const char* default_value;
  const char* help;
  const char* choices = nullptr;
};

// `choices` of an argument that names GPU types: a string argument, each
// string of a string_list, or each key of a number_table must be a GPU type
// of the cluster. Plugins see the cluster only once it runs, so the core
// checks these before creating any plugin: `tessel validate` names a type the
// simulated cluster lacks. On real nodes the cluster is unknown until agents
// join, and a plugin still checks what it uses.
inline constexpr char kClusterGpuTypes[] = "@cluster_gpu_types";

// The room in the records for each text, its terminating NUL included. The
// macros refuse (static_assert) a longer text.
inline constexpr std::size_t kPluginNameSize = 64;
inline constexpr std::size_t kPluginVersionSize = 32;
inline constexpr std::size_t kPluginDescriptionSize = 512;
inline constexpr std::size_t kArgNameSize = 64;
inline constexpr std::size_t kArgDefaultSize = 256;
inline constexpr std::size_t kArgHelpSize = 512;
inline constexpr std::size_t kArgChoicesSize = 512;

// An ArgSpec as the library file holds it. Every text is NUL-terminated
// within its array; the loader refuses a record where one is not.
struct ArgRecord {
  char name[kArgNameSize];
  ArgType type;
  std::uint32_t has_default;  // 0: required; 1: default_value holds its default
  char default_value[kArgDefaultSize];
  char help[kArgHelpSize];
  char choices[kArgChoicesSize];  // empty: any string
};

// The record a plugin library exports as tessel_plugin_info.
struct PluginInfo {
  std::uint32_t abi_version;  // first in every ABI, so that any version can read it
  PluginKind kind;
  std::uint64_t layout;     // kAbiLayout of the headers it was built against
  std::uint64_t arg_count;  // records in tessel_plugin_args
  char name[kPluginNameSize];
  char version[kPluginVersionSize];
  char description[kPluginDescriptionSize];
};

namespace abi {

// Whether `text` fits, with its NUL, in `size` characters.
constexpr bool fits(const char* text, std::size_t size) {
  if (text == nullptr) return true;
  std::size_t length = 0;
  while (text[length] != '\0') ++length;
  return length < size;
}

template <std::size_t N>
constexpr void copy(char (&to)[N], const char* from) {
  std::size_t i = 0;
  for (; from != nullptr && from[i] != '\0' && i + 1 < N; ++i) to[i] = from[i];
  for (; i < N; ++i) to[i] = '\0';
}

template <std::size_t N>
constexpr bool args_fit(const ArgSpec (&specs)[N]) {
  for (const ArgSpec& spec : specs)
    if (!fits(spec.name, kArgNameSize) || !fits(spec.default_value, kArgDefaultSize) ||
        !fits(spec.help, kArgHelpSize) || !fits(spec.choices, kArgChoicesSize))
      return false;
  return true;
}

template <std::size_t N>
consteval std::array<ArgRecord, N> arg_records(const ArgSpec (&specs)[N]) {
  std::array<ArgRecord, N> out{};
  for (std::size_t i = 0; i < N; ++i) {
    copy(out[i].name, specs[i].name);
    out[i].type = specs[i].type;
    out[i].has_default = specs[i].default_value != nullptr;
    copy(out[i].default_value, specs[i].default_value);
    copy(out[i].help, specs[i].help);
    copy(out[i].choices, specs[i].choices);
  }
  return out;
}

consteval PluginInfo info_record(PluginKind kind, const char* name, const char* version, const char* description,
                                 std::uint64_t arg_count, std::uint64_t layout) {
  PluginInfo info{};
  info.abi_version = kAbiVersion;
  info.kind = kind;
  info.layout = layout;
  info.arg_count = arg_count;
  copy(info.name, name);
  copy(info.version, version);
  copy(info.description, description);
  return info;
}

}  // namespace abi

using NumberTable = std::map<std::string, double, std::less<>>;
using ArgValue = std::variant<bool, std::int64_t, double, std::string, std::vector<double>,
                              std::vector<std::string>, NumberTable>;

// Arguments after validation: every declared argument is present, with its
// declared type. Asking for an undeclared one is a plugin bug (logic_error).
class PluginArgs {
 public:
  void set(std::string name, ArgValue value) { values_[std::move(name)] = std::move(value); }

  bool boolean(std::string_view name) const { return get<bool>(name); }
  std::int64_t integer(std::string_view name) const { return get<std::int64_t>(name); }
  double number(std::string_view name) const { return get<double>(name); }
  const std::string& string(std::string_view name) const { return get<std::string>(name); }
  const std::vector<double>& numbers(std::string_view name) const {
    return get<std::vector<double>>(name);
  }
  const std::vector<std::string>& strings(std::string_view name) const {
    return get<std::vector<std::string>>(name);
  }
  const NumberTable& number_table(std::string_view name) const { return get<NumberTable>(name); }
  const std::map<std::string, ArgValue, std::less<>>& all() const { return values_; }

 private:
  template <class T>
  const T& get(std::string_view name) const {
    auto it = values_.find(name);
    if (it == values_.end() || !std::holds_alternative<T>(it->second))
      throw std::logic_error("plugin asked for undeclared argument '" + std::string(name) + "'");
    return std::get<T>(it->second);
  }
  std::map<std::string, ArgValue, std::less<>> values_;
};

// An argument declared at load time by the code a plugin hosts (a Python
// class), checked exactly as an ArgSpec is.
struct ArgDeclaration {
  std::string name;
  ArgType type = ArgType::string;
  std::optional<std::string> default_value;  // TOML value syntax; nullopt: required
  std::string help;
  std::string choices;  // as ArgSpec::choices; empty: any
};

// Thrown by a plugin constructor when an argument has the right type but a
// wrong value ("thresholds must increase"). The loader reports it against the
// argument's line in the user's TOML file.
class TESSEL_VISIBLE ArgumentError : public std::invalid_argument {
 public:
  ArgumentError(std::string argument, const std::string& message)
      : std::invalid_argument(message), argument_(std::move(argument)) {}
  const std::string& argument() const { return argument_; }

 private:
  std::string argument_;
};

// What a plugin receives at construction.
class PluginContext {
 public:
  PluginContext(const PluginArgs& args, std::uint64_t seed, SlotRegistry& slots,
                std::string config_directory = {})
      : args_(args), seed_(seed), slots_(slots), config_directory_(std::move(config_directory)) {}

  const PluginArgs& args() const { return args_; }
  // Relative paths in arguments (a data file) are relative to the config
  // file; this turns one into a path the plugin can open.
  std::string resolve(const std::string& path) const {
    if (path.empty() || path.front() == '/' || config_directory_.empty()) return path;
    return config_directory_ + "/" + path;
  }
  // A seed derived from the run's seed and this plugin; use it for any randomness.
  std::uint64_t seed() const { return seed_; }
  template <class T>
  Slot<T> job_slot() const { return Slot<T>(slots_.next_job_slot()); }
  template <class T>
  Slot<T> node_slot() const { return Slot<T>(slots_.next_node_slot()); }

 private:
  const PluginArgs& args_;
  std::uint64_t seed_;
  SlotRegistry& slots_;
  std::string config_directory_;
};

// Thrown by a plugin that hosts the user's own code when that code fails (a
// Python policy raised, or returned something that is not a decision). The
// message says where in the user's code. The core reports it as the user's
// to fix (exit code 2), naming the plugin, its stage and the time.
class TESSEL_VISIBLE HostedCodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown instead when that code was stopped because the user stopped the
// run (Ctrl-C: a Python policy raised KeyboardInterrupt). The run is
// 'interrupted', not 'failed'. The message says where the user's code was
// ("policies/sf.py:17").
class TESSEL_VISIBLE HostedCodeInterrupted : public HostedCodeError {
 public:
  using HostedCodeError::HostedCodeError;
};

// The user's code may run for as long as it likes, where the core cannot
// stop it between events: a plugin that hosts it registers how to stop it.
// When runs are being stopped, the core calls `interrupt` (from a thread of
// its own, every few tens of milliseconds until they have stopped) with the
// threads of those runs, as pthread_self() names them; hosted code running
// on one of them should soon fail with HostedCodeInterrupted. One per
// process; registering again replaces it.
TESSEL_VISIBLE void set_hosted_code_interrupter(void (*interrupt)(const std::vector<std::uint64_t>& threads));
// Calls the registered interrupter, if any (the runners).
TESSEL_VISIBLE void interrupt_hosted_code(const std::vector<std::uint64_t>& threads);

// The base of every stage interface (see stages.hpp).
class TESSEL_VISIBLE Plugin {
 public:
  virtual ~Plugin() = default;

  // For a plugin that hosts the user's own code: where that code is
  // ("policies/sf.py:14, class SmallestFirst"). The core names it in every error
  // it reports against this plugin and counts a broken contract as the
  // user's mistake (exit 2), not a bug in the plugin (exit 1). Empty for a
  // plugin whose code is all its own.
  virtual std::string hosted_code() const { return {}; }

  // Return false only if, when no job arrived, finished or failed and the
  // cluster did not change, this plugin would decide exactly what it decided
  // last round. The simulator then skips such rounds instead of stepping
  // through them; results are the same either way, only faster.
  virtual bool time_sensitive() const { return true; }

  // Return false only if this plugin never reads a running job's progress:
  // JobState::executed_work, attained_service, gpu_seconds, shared_seconds
  // (remaining_work() and SchedulerView::remaining_seconds() included), and
  // never uses the lab (whose forks and plugins read them on its behalf).
  // Those grow linearly between rate changes; when no plugin of a run reads
  // them, the simulator brings them up to date only when a job stops,
  // resizes or the run ends, instead of advancing every running job at every
  // round (the largest remaining cost of a round). A plugin that answers
  // false and reads them anyway sees values from the job's last start, stop
  // or rate change; SchedulerView::attained_service is current either way.
  // Why a declaration and not accessors computing progress on read: it
  // leaves JobState's plain fields, and every plugin reading them, as they
  // are, and a round whose plugins read progress costs what it did.
  virtual bool reads_progress() const { return true; }
};

// Filled by a factory that fails. `argument` names the offending argument
// when the failure was an ArgumentError; `interrupted` says the hosted code
// was stopped by the user (HostedCodeInterrupted, as the module it imports
// loops): the core then stops, as for Ctrl-C, instead of reporting an error.
struct FactoryError {
  std::string argument;
  std::string message;
  bool interrupted = false;
};

using PluginFactory = Plugin* (*)(const PluginContext&, FactoryError&) noexcept;

// Lists the arguments the hosted code takes beyond the plugin's own ArgSpec
// table, given those (checked, in `context`). Returns false, with `error`
// filled, when the hosted code cannot be loaded. Called before the factory.
using ArgumentDeclarer = bool (*)(const PluginContext&, std::vector<ArgDeclaration>&, FactoryError&) noexcept;

namespace abi {

// What the exported functions do with an exception: nothing a plugin throws
// crosses into the core; `error` says what it was, and `failed` is returned.
template <class Result, class Call>
Result reported(FactoryError& error, Result failed, Call&& call) noexcept {
  try {
    return call();
  } catch (const ArgumentError& e) {
    error.argument = e.argument();
    error.message = e.what();
  } catch (const HostedCodeInterrupted& e) {
    error.interrupted = true;
    error.message = e.what();
  } catch (const std::exception& e) {
    error.message = e.what();
  } catch (...) {
    error.message = "unknown exception";
  }
  return failed;
}

}  // namespace abi

}  // namespace tessel

// Exports `Class` (a subclass of one stage interface, constructible from
// `const tessel::PluginContext&`) as a tessel plugin. Use once per library, at
// namespace scope. ARGS is a constexpr array of tessel::ArgSpec. Include
// <tessel/tessel.hpp>, which brings kAbiLayout (abi_layout.hpp).
#define TESSEL_PLUGIN_WITH_ARGS(Class, kind, name, version, description, ARGS)                       \
  static_assert(::tessel::abi::args_fit(ARGS),                                                      \
                "an argument's name, default, help or choices is too long for its ArgRecord field " \
                "(see kArgNameSize and the others in tessel/plugin.hpp)");                          \
  extern "C" TESSEL_VISIBLE constinit const std::array<::tessel::ArgRecord, std::size(ARGS)>   \
      tessel_plugin_args = ::tessel::abi::arg_records(ARGS);                                        \
  TESSEL_PLUGIN_EXPORT_(Class, kind, name, version, description, std::size(ARGS))

// A plugin hosting code that declares further arguments: DECLARER is an
// ArgumentDeclarer (see above).
#define TESSEL_PLUGIN_HOSTING(Class, kind, name, version, description, ARGS, DECLARER)              \
  TESSEL_PLUGIN_WITH_ARGS(Class, kind, name, version, description, ARGS)                            \
  extern "C" TESSEL_VISIBLE bool tessel_plugin_arguments(                                      \
      const ::tessel::PluginContext& context, std::vector<::tessel::ArgDeclaration>& declarations,  \
      ::tessel::FactoryError& error) noexcept {                                                     \
    return ::tessel::abi::reported(error, false, [&] { return DECLARER(context, declarations, error); }); \
  }                                                                                                 \
  static_assert(std::is_same_v<decltype(&tessel_plugin_arguments), ::tessel::ArgumentDeclarer>);

#define TESSEL_PLUGIN(Class, kind, name, version, description) \
  TESSEL_PLUGIN_EXPORT_(Class, kind, name, version, description, 0u)

#define TESSEL_PLUGIN_EXPORT_(Class, kind, name, version, description, arg_count)                       \
  static_assert(std::is_base_of_v<::tessel::Plugin, Class>, "plugins derive from a stage");             \
  static_assert(::tessel::abi::fits(name, ::tessel::kPluginNameSize), "the plugin name is too long");   \
  static_assert(::tessel::abi::fits(version, ::tessel::kPluginVersionSize),                             \
                "the plugin version is too long");                                                      \
  static_assert(::tessel::abi::fits(description, ::tessel::kPluginDescriptionSize),                     \
                "the plugin description is too long");                                                  \
  extern "C" TESSEL_VISIBLE constinit const ::tessel::PluginInfo tessel_plugin_info =              \
      ::tessel::abi::info_record(::tessel::PluginKind::kind, name, version, description, arg_count,     \
                                 ::tessel::kAbiLayout);                                                 \
  extern "C" TESSEL_VISIBLE ::tessel::Plugin* tessel_plugin_create(                                \
      const ::tessel::PluginContext& context, ::tessel::FactoryError& error) noexcept {                 \
    return ::tessel::abi::reported<::tessel::Plugin*>(error, nullptr, [&] { return new Class(context); }); \
  }                                                                                                     \
  static_assert(std::is_same_v<decltype(&tessel_plugin_create), ::tessel::PluginFactory>);
