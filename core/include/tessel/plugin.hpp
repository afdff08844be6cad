// The plugin ABI: what a plugin library exports and how the core creates it.
//
// A plugin library exports two symbols through Boost.DLL aliases in the
// "tessel" section:
//   tessel_plugin_info       a PluginInfo record: ABI version, kind, name,
//                            version, description and argument schema;
//   tessel_plugin_create     the factory, PluginFactory.
// A plugin that hosts the user's own code (the Python bridge) may export a
// third, whose arguments depend on that code:
//   tessel_plugin_arguments  an ArgumentDeclarer.
// The loader reads the info record and checks the ABI version, the kind and
// the arguments before it calls any plugin code. Use TESSEL_PLUGIN (below)
// rather than writing these by hand.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include <boost/config.hpp>
#include <boost/dll/alias.hpp>

#include "tessel/slots.hpp"

namespace tessel {

// Bump whenever a public header changes in a way that breaks plugins built
// against the previous one.
inline constexpr std::uint32_t kAbiVersion = 4;

enum class PluginKind : std::uint32_t { admission = 1, allocation = 2, placement = 3, elasticity = 4 };
std::string_view to_string(PluginKind kind);

// number_table is a TOML table of numbers by name: `{ research = 0.6, prod = 0.4 }`.
enum class ArgType : std::uint32_t { boolean, integer, number, string, number_list, string_list, number_table };
std::string_view to_string(ArgType type);

// One declared argument. `default_value` is TOML value syntax ("3600",
// "[3600]", "true", "\"fifo\""); nullptr makes the argument required.
// `choices` lists the allowed strings as "a|b|c" (string arguments only).
struct ArgSpec {
  const char* name;
  ArgType type;
  const char* default_value;
  const char* help;
  const char* choices = nullptr;
};

struct PluginInfo {
  std::uint32_t abi_version;  // first, so any version can read it
  PluginKind kind;
  const char* name;
  const char* version;
  const char* description;
  const ArgSpec* args;
  std::uint32_t arg_count;
};

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
  std::string choices;  // "a|b|c" (string arguments only); empty: any
};

// Thrown by a plugin constructor when an argument has the right type but a
// wrong value ("thresholds must increase"). The loader reports it against the
// argument's line in the user's TOML file.
class BOOST_SYMBOL_VISIBLE ArgumentError : public std::invalid_argument {
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
class BOOST_SYMBOL_VISIBLE HostedCodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The base of every stage interface (see stages.hpp).
class BOOST_SYMBOL_VISIBLE Plugin {
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
};

// Filled by a factory that fails. `argument` names the offending argument
// when the failure was an ArgumentError.
struct FactoryError {
  std::string argument;
  std::string message;
};

using PluginFactory = Plugin* (*)(const PluginContext&, FactoryError&) noexcept;

// Lists the arguments the hosted code takes beyond the plugin's own ArgSpec
// table, given those (checked, in `context`). Returns false, with `error`
// filled, when the hosted code cannot be loaded. Called before the factory.
using ArgumentDeclarer = bool (*)(const PluginContext&, std::vector<ArgDeclaration>&, FactoryError&) noexcept;

}  // namespace tessel

// Exports `Class` (a subclass of one stage interface, constructible from
// `const tessel::PluginContext&`) as a tessel plugin. Use once per library, at
// namespace scope. ARGS is an array of tessel::ArgSpec.
#define TESSEL_PLUGIN_WITH_ARGS(Class, kind, name, version, description, ARGS)                 \
  TESSEL_PLUGIN_EXPORT_(Class, kind, name, version, description, ARGS,                         \
                        static_cast<std::uint32_t>(sizeof(ARGS) / sizeof(ARGS[0])))

// A plugin hosting code that declares further arguments: DECLARER is an
// ArgumentDeclarer (see above).
#define TESSEL_PLUGIN_HOSTING(Class, kind, name, version, description, ARGS, DECLARER)        \
  TESSEL_PLUGIN_WITH_ARGS(Class, kind, name, version, description, ARGS)                      \
  BOOST_DLL_ALIAS_SECTIONED(DECLARER, tessel_plugin_arguments, tessel)

#define TESSEL_PLUGIN(Class, kind, name, version, description) \
  TESSEL_PLUGIN_EXPORT_(Class, kind, name, version, description, nullptr, 0u)

#define TESSEL_PLUGIN_EXPORT_(Class, kind, name, version, description, args, arg_count)       \
  namespace tessel_plugin_export_ {                                                           \
  static_assert(std::is_base_of_v<::tessel::Plugin, Class>, "plugins derive from a stage");   \
  const ::tessel::PluginInfo info = {::tessel::kAbiVersion, ::tessel::PluginKind::kind, name, \
                                     version,  description, args,  arg_count};                \
  ::tessel::Plugin* create(const ::tessel::PluginContext& context,                            \
                           ::tessel::FactoryError& error) noexcept {                          \
    try {                                                                                     \
      return new Class(context);                                                              \
    } catch (const ::tessel::ArgumentError& e) {                                              \
      error.argument = e.argument();                                                          \
      error.message = e.what();                                                               \
    } catch (const std::exception& e) {                                                       \
      error.message = e.what();                                                               \
    } catch (...) {                                                                           \
      error.message = "unknown exception";                                                    \
    }                                                                                         \
    return nullptr;                                                                           \
  }                                                                                           \
  }                                                                                           \
  BOOST_DLL_ALIAS_SECTIONED(tessel_plugin_export_::info, tessel_plugin_info, tessel)          \
  BOOST_DLL_ALIAS_SECTIONED(tessel_plugin_export_::create, tessel_plugin_create, tessel)
