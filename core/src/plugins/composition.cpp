#include "plugins/composition.hpp"

#include <algorithm>
#include <span>

#include "tessel/rng.hpp"

namespace tessel {

namespace {

std::string who(const PluginInfo& info) {
  return std::string(to_string(info.kind)) + " plugin '" + info.name + "'";
}

// Converts a TOML value to the declared type; returns an error message on mismatch.
std::variant<ArgValue, std::string> convert(const toml::node& node, const ArgDeclaration& spec) {
  auto expected = [&] {
    return "expects " + std::string(to_string(spec.type)) + ", got " + std::string(type_name(node));
  };
  auto number = [](const toml::node& n) -> std::optional<double> {
    if (const auto* i = n.as_integer()) return static_cast<double>(i->get());
    if (const auto* f = n.as_floating_point()) return f->get();
    return std::nullopt;
  };
  switch (spec.type) {
    case ArgType::boolean:
      if (const auto* b = node.as_boolean()) return ArgValue(b->get());
      return expected();
    case ArgType::integer:
      if (const auto* i = node.as_integer()) return ArgValue(i->get());
      return expected();
    case ArgType::number:
      if (auto x = number(node)) return ArgValue(*x);
      return expected();
    case ArgType::string: {
      const auto* s = node.as_string();
      if (s == nullptr) return expected();
      if (!spec.choices.empty() && spec.choices != kClusterGpuTypes) {
        const std::string& choices = spec.choices;
        const std::string bounded = "|" + choices + "|";
        if (bounded.find("|" + s->get() + "|") == std::string::npos) {
          std::string listed;
          for (char c : choices) listed += c == '|' ? std::string(", ") : std::string(1, c);
          return "unknown value '" + s->get() + "' (valid: " + listed + ")";
        }
      }
      return ArgValue(s->get());
    }
    case ArgType::number_list: {
      const auto* array = node.as_array();
      if (array == nullptr) return expected();
      std::vector<double> out;
      for (const auto& element : *array) {
        auto x = number(element);
        if (!x) return "expects a list of numbers, found " + std::string(type_name(element));
        out.push_back(*x);
      }
      return ArgValue(std::move(out));
    }
    case ArgType::string_list: {
      const auto* array = node.as_array();
      if (array == nullptr) return expected();
      std::vector<std::string> out;
      for (const auto& element : *array) {
        const auto* s = element.as_string();
        if (s == nullptr) return "expects a list of strings, found " + std::string(type_name(element));
        out.push_back(s->get());
      }
      return ArgValue(std::move(out));
    }
    case ArgType::number_table: {
      const auto* table = node.as_table();
      if (table == nullptr) return expected();
      NumberTable out;
      for (auto&& [key, value] : *table) {
        auto x = number(value);
        if (!x)
          return "expects numbers in its table, found " + std::string(type_name(value)) + " for '" +
                 std::string(key.str()) + "'";
        out.emplace(std::string(key.str()), *x);
      }
      return ArgValue(std::move(out));
    }
  }
  return std::string("unknown argument type");
}

std::string where_of(const StageConfig& stage, std::string_view argument) {
  auto it = stage.arg_where.find(argument);
  return it == stage.arg_where.end() ? stage.where : it->second;
}

// The first GPU type an argument declared kClusterGpuTypes names that the
// cluster lacks, if any.
std::optional<std::string> type_lacking(const ArgValue& value, const std::vector<std::string>& types) {
  auto lacks = [&](const std::string& type) { return std::find(types.begin(), types.end(), type) == types.end(); };
  if (const auto* one = std::get_if<std::string>(&value))
    if (lacks(*one)) return *one;
  if (const auto* list = std::get_if<std::vector<std::string>>(&value))
    for (const std::string& type : *list)
      if (lacks(type)) return type;
  if (const auto* table = std::get_if<NumberTable>(&value))
    for (const auto& [type, number] : *table)
      if (lacks(type)) return type;
  return std::nullopt;
}

}  // namespace

bool ComposedScheduler::time_sensitive() const {
  return admission->time_sensitive() || allocation->time_sensitive() ||
         placement->time_sensitive() || elasticity->time_sensitive();
}

bool ComposedScheduler::reads_progress() const {
  return admission->reads_progress() || allocation->reads_progress() || placement->reads_progress() ||
         elasticity->reads_progress();
}

namespace {

// `others` says what to do with keys no declaration names: report them, or
// leave them for the hosted code's declarations (a first pass).
enum class OtherKeys { refused, left };

PluginArgs check_declared(const StageConfig& stage, const PluginInfo& info,
                          std::span<const ArgDeclaration> declarations, OtherKeys others,
                          const std::vector<std::string>* cluster_gpu_types, Diagnostics& diagnostics) {
  PluginArgs out;
  std::string valid;
  for (const ArgDeclaration& spec : declarations) valid += (valid.empty() ? "" : ", ") + spec.name;

  for (auto&& [key, value] : stage.args) {
    const bool declared = std::any_of(declarations.begin(), declarations.end(),
                                      [&](const ArgDeclaration& spec) { return key.str() == spec.name; });
    if (!declared && others == OtherKeys::refused)
      diagnostics.error(where_of(stage, key.str()),
                        "unknown argument '" + std::string(key.str()) + "' for " + who(info) +
                            (valid.empty() ? " (it takes none)" : " (valid: " + valid + ")"));
  }
  for (const ArgDeclaration& spec : declarations) {
    const toml::node* node = stage.args.get(spec.name);
    toml::table parsed_default;
    if (node == nullptr) {
      if (!spec.default_value) {
        diagnostics.error(stage.where, who(info) + " needs argument '" + spec.name + "' (" + spec.help + ")");
        continue;
      }
      try {
        parsed_default = toml::parse("v = " + *spec.default_value);
        node = parsed_default.get("v");
      } catch (const toml::parse_error&) {
        diagnostics.error(stage.where, who(info) + " declares an unreadable default for '" + spec.name +
                                           "': " + *spec.default_value);
        continue;
      }
    }
    auto converted = convert(*node, spec);
    if (auto* error = std::get_if<std::string>(&converted)) {
      diagnostics.error(where_of(stage, spec.name), "argument '" + spec.name + "' of " + who(info) + " " + *error);
      continue;
    }
    ArgValue& value = std::get<ArgValue>(converted);
    if (spec.choices == kClusterGpuTypes && cluster_gpu_types != nullptr)
      if (const std::optional<std::string> lacking = type_lacking(value, *cluster_gpu_types)) {
        std::string known;
        for (const std::string& type : *cluster_gpu_types) known += (known.empty() ? "" : ", ") + type;
        diagnostics.error(where_of(stage, spec.name), "argument '" + spec.name + "' of " + who(info) +
                                                          " names GPU type '" + *lacking +
                                                          "', which the cluster lacks (its types: " + known + ")");
        continue;
      }
    out.set(spec.name, std::move(value));
  }
  return out;
}

}  // namespace

PluginArgs check_arguments(const StageConfig& stage, const PluginEntry& entry,
                           const std::string& config_directory, Diagnostics& diagnostics,
                           const std::vector<std::string>* cluster_gpu_types) {
  std::vector<ArgDeclaration> declarations = entry.arguments;
  if (entry.declare_arguments == nullptr)
    return check_declared(stage, entry.info, declarations, OtherKeys::refused, cluster_gpu_types, diagnostics);

  // The plugin's own arguments say which code it hosts; that code declares the rest.
  Diagnostics own;
  const PluginArgs args = check_declared(stage, entry.info, declarations, OtherKeys::left, cluster_gpu_types, own);
  if (!own.empty()) {
    for (const Diagnostic& d : own.items()) diagnostics.error(d.where, d.message);
    return args;
  }
  SlotRegistry no_slots;
  std::vector<ArgDeclaration> hosted;
  FactoryError error;
  if (!entry.declare_arguments(PluginContext(args, 0, no_slots, config_directory), hosted, error)) {
    if (error.interrupted) throw Interrupted(interrupted_loading(entry.info, error));
    diagnostics.error(error.argument.empty() ? stage.where : where_of(stage, error.argument),
                      who(entry.info) + ": " + error.message);
    return args;
  }
  for (ArgDeclaration& declaration : hosted) {
    if (std::any_of(declarations.begin(), declarations.end(),
                    [&](const ArgDeclaration& d) { return d.name == declaration.name; })) {
      diagnostics.error(stage.where, who(entry.info) + ": its code declares argument '" + declaration.name +
                                         "' twice, or one of the plugin's own");
      return args;
    }
    declarations.push_back(std::move(declaration));
  }
  return check_declared(stage, entry.info, declarations, OtherKeys::refused, cluster_gpu_types, diagnostics);
}

StageConfig parse_stage(PluginKind kind, std::string_view text) {
  StageConfig stage;
  stage.kind = kind;
  stage.where = "policy '" + std::string(text) + "'";
  const auto brace = text.find('{');
  std::string_view name = text.substr(0, brace);
  while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
  while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
  stage.plugin = std::string(name);
  if (stage.plugin.empty()) throw ConfigError(stage.where, "names no plugin");
  if (brace != std::string_view::npos) {
    try {
      toml::table parsed = toml::parse("v = " + std::string(text.substr(brace)));
      if (const auto* args = parsed.get("v")->as_table()) stage.args = *args;
    } catch (const toml::parse_error& e) {
      throw ConfigError(stage.where, "arguments are not a TOML inline table: " + std::string(e.description()));
    }
  }
  return stage;
}

namespace {

// The two halves of creating a plugin, so that composing four of them can
// report every stage's problems before creating any.
const PluginEntry* find_and_check(const StageConfig& stage, PluginRegistry& registry,
                                  const std::string& config_directory, const std::vector<std::string>* cluster_gpu_types,
                                  PluginArgs& args, Diagnostics& diagnostics) {
  try {
    const PluginEntry* entry = stage.library.empty() ? &registry.find(stage.kind, stage.plugin)
                                                     : &registry.open(stage.library, stage.kind);
    // The run is stored under the name; the library says what it runs.
    if (entry->info.name != stage.plugin) {
      diagnostics.error(stage.where, "'path' names " + stage.library + ", which is " +
                                         std::string(to_string(stage.kind)) + " plugin '" + entry->info.name +
                                         "', not '" + stage.plugin + "'");
      return nullptr;
    }
    args = check_arguments(stage, *entry, config_directory, diagnostics, cluster_gpu_types);
    return entry;
  } catch (const PluginLoadError& e) {
    diagnostics.error(stage.where, e.what());
    return nullptr;
  }
}

PluginPtr<Plugin> instantiate(const StageConfig& stage, const PluginEntry& entry, const PluginContext& context,
                              Diagnostics& diagnostics) {
  try {
    return PluginRegistry::create(entry, context);
  } catch (const ArgumentError& e) {
    diagnostics.error(where_of(stage, e.argument()),
                      "argument '" + e.argument() + "' of " + who(entry.info) + ": " + e.what());
  } catch (const PluginLoadError& e) {
    diagnostics.error(stage.where, e.what());
  }
  return nullptr;
}

}  // namespace

PluginPtr<Plugin> create_plugin(const StageConfig& stage, PluginRegistry& registry, std::uint64_t seed,
                                SlotRegistry& slots, const std::string& config_directory,
                                const std::vector<std::string>* cluster_gpu_types) {
  Diagnostics diagnostics;
  PluginArgs args;
  const PluginEntry* entry = find_and_check(stage, registry, config_directory, cluster_gpu_types, args, diagnostics);
  diagnostics.raise_if_any();
  PluginPtr<Plugin> plugin = instantiate(stage, *entry, PluginContext(args, seed, slots, config_directory), diagnostics);
  diagnostics.raise_if_any();
  return plugin;
}

ComposedScheduler compose_scheduler(const SchedulerConfig& config, PluginRegistry& registry,
                                    std::uint64_t seed, const std::string& config_directory,
                                    const std::vector<std::string>* cluster_gpu_types) {
  Diagnostics diagnostics;
  std::array<const PluginEntry*, 4> entries{};
  std::array<PluginArgs, 4> args;
  for (std::size_t i = 0; i < 4; ++i)
    entries[i] = find_and_check(config.stages[i], registry, config_directory, cluster_gpu_types, args[i], diagnostics);
  diagnostics.raise_if_any();

  ComposedScheduler composed;
  composed.slots = std::make_shared<SlotRegistry>();
  std::array<PluginPtr<Plugin>, 4> created;
  for (std::size_t i = 0; i < 4; ++i) {
    composed.info[i] = entries[i]->info;
    const PluginContext context(args[i], derive_seed(seed, i + 1), *composed.slots, config_directory);
    created[i] = instantiate(config.stages[i], *entries[i], context, diagnostics);
  }
  diagnostics.raise_if_any();
  try {
    composed.admission = as_stage<AdmissionPolicy>(std::move(created[0]), config.stages[0]);
    composed.allocation = as_stage<AllocationPolicy>(std::move(created[1]), config.stages[1]);
    composed.placement = as_stage<PlacementPolicy>(std::move(created[2]), config.stages[2]);
    composed.elasticity = as_stage<ElasticityPolicy>(std::move(created[3]), config.stages[3]);
  } catch (const PluginLoadError& e) {
    throw ConfigError("", e.what());
  }
  return composed;
}

}  // namespace tessel
