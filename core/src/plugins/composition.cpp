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
std::variant<ArgValue, std::string> convert(const toml::node& node, const ArgSpec& spec) {
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
      if (spec.choices != nullptr) {
        const std::string choices = spec.choices;
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

template <class Stage>
PluginPtr<Stage> downcast(PluginPtr<Plugin> plugin, const PluginEntry& entry) {
  auto* stage = dynamic_cast<Stage*>(plugin.get());
  if (stage == nullptr)
    throw PluginLoadError(LoadError::wrong_kind,
                          entry.path + ": declares itself " + std::string(to_string(entry.info->kind)) +
                              " plugin but its class does not implement that stage");
  PluginDeleter deleter = plugin.get_deleter();
  plugin.release();
  return PluginPtr<Stage>(stage, std::move(deleter));
}

}  // namespace

bool ComposedScheduler::time_sensitive() const {
  return admission->time_sensitive() || allocation->time_sensitive() ||
         placement->time_sensitive() || elasticity->time_sensitive();
}

PluginArgs check_arguments(const StageConfig& stage, const PluginInfo& info, Diagnostics& diagnostics) {
  PluginArgs out;
  const std::span<const ArgSpec> specs(info.args, info.arg_count);
  std::string valid;
  for (const ArgSpec& spec : specs) valid += (valid.empty() ? "" : ", ") + std::string(spec.name);

  for (auto&& [key, value] : stage.args) {
    const bool declared = std::any_of(specs.begin(), specs.end(),
                                      [&](const ArgSpec& spec) { return key.str() == spec.name; });
    if (!declared)
      diagnostics.error(where_of(stage, key.str()),
                        "unknown argument '" + std::string(key.str()) + "' for " + who(info) +
                            (valid.empty() ? " (it takes none)" : " (valid: " + valid + ")"));
  }
  for (const ArgSpec& spec : specs) {
    const toml::node* node = stage.args.get(spec.name);
    toml::table parsed_default;
    if (node == nullptr) {
      if (spec.default_value == nullptr) {
        diagnostics.error(stage.where, who(info) + " needs argument '" + spec.name + "' (" + spec.help + ")");
        continue;
      }
      try {
        parsed_default = toml::parse(std::string("v = ") + spec.default_value);
        node = parsed_default.get("v");
      } catch (const toml::parse_error&) {
        diagnostics.error(stage.where, who(info) + " declares an unreadable default for '" + spec.name +
                                           "': " + spec.default_value);
        continue;
      }
    }
    auto converted = convert(*node, spec);
    if (auto* error = std::get_if<std::string>(&converted))
      diagnostics.error(where_of(stage, spec.name),
                        "argument '" + std::string(spec.name) + "' of " + who(info) + " " + *error);
    else
      out.set(spec.name, std::get<ArgValue>(std::move(converted)));
  }
  return out;
}

ComposedScheduler compose_scheduler(const SchedulerConfig& config, PluginRegistry& registry,
                                    std::uint64_t seed, const std::string& config_directory) {
  Diagnostics diagnostics;
  std::array<const PluginEntry*, 4> entries{};
  std::array<PluginArgs, 4> args;
  for (std::size_t i = 0; i < 4; ++i) {
    const StageConfig& stage = config.stages[i];
    try {
      entries[i] = stage.library.empty() ? &registry.find(stage.kind, stage.plugin)
                                         : &registry.open(stage.library, stage.kind);
    } catch (const PluginLoadError& e) {
      diagnostics.error(stage.where, e.what());
      continue;
    }
    args[i] = check_arguments(stage, *entries[i]->info, diagnostics);
  }
  diagnostics.raise_if_any();

  ComposedScheduler composed;
  composed.slots = std::make_shared<SlotRegistry>();
  std::array<PluginPtr<Plugin>, 4> created;
  for (std::size_t i = 0; i < 4; ++i) {
    const StageConfig& stage = config.stages[i];
    composed.info[i] = entries[i]->info;
    const PluginContext context(args[i], derive_seed(seed, i + 1), *composed.slots, config_directory);
    try {
      created[i] = PluginRegistry::create(*entries[i], context);
    } catch (const ArgumentError& e) {
      diagnostics.error(where_of(stage, e.argument()), "argument '" + e.argument() + "' of " +
                                                           who(*entries[i]->info) + ": " + e.what());
    } catch (const PluginLoadError& e) {
      diagnostics.error(stage.where, e.what());
    }
  }
  diagnostics.raise_if_any();
  try {
    composed.admission = downcast<AdmissionPolicy>(std::move(created[0]), *entries[0]);
    composed.allocation = downcast<AllocationPolicy>(std::move(created[1]), *entries[1]);
    composed.placement = downcast<PlacementPolicy>(std::move(created[2]), *entries[2]);
    composed.elasticity = downcast<ElasticityPolicy>(std::move(created[3]), *entries[3]);
  } catch (const PluginLoadError& e) {
    throw ConfigError("", e.what());
  }
  return composed;
}

}  // namespace tessel
