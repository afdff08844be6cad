#include "config/sweep.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

namespace tessel {

namespace {

// TOML value syntax for --set, and the same value in JSON for the axes.
std::string toml_text(const toml::node& value) {
  std::ostringstream out;
  // Relaxed precision writes 1.4, not 1.3999999999999999, in labels and overrides.
  value.visit([&](auto&& v) {
    out << toml::toml_formatter(v, toml::toml_formatter::default_flags | toml::format_flags::relaxed_float_precision);
  });
  return out.str();
}

nlohmann::ordered_json json_value(const toml::node& value) {
  if (const auto* s = value.as_string()) return s->get();
  if (const auto* i = value.as_integer()) return i->get();
  if (const auto* f = value.as_floating_point()) return f->get();
  if (const auto* b = value.as_boolean()) return b->get();
  return toml_text(value);  // arrays and tables: as written
}

// One value of an axis: the overrides it applies and its label in the axes JSON.
struct AxisValue {
  std::vector<std::string> overrides;
  nlohmann::ordered_json label;
};

// A config path an axis sets, and where the sweep writes it.
struct SweptPath {
  std::string path;
  std::string where;
};

struct Axis {
  std::string name;  // in the axes JSON: the path, "seed", or the variants' axis name
  std::vector<AxisValue> values;
  bool named = false;  // labels are names, not the values themselves
  std::vector<SweptPath> paths;
};

// config_paths_overlap, of paths as [sweep] writes them.
bool overlap(const std::string& a, const std::string& b) {
  const auto x = config_path_segments(a), y = config_path_segments(b);
  return x && y && config_paths_overlap(*x, *y);  // an unclosed quote: reported when the point is read
}

// Two axes that set the same config path would label each run by one and
// run it with the other's value; two such paths in one variant, set one
// after the other, leave the variant meaning what their order says. Both
// are refused, as a list that names a value twice (two runs of one point).
void check_distinct(const std::vector<Axis>& axes, Diagnostics& diagnostics) {
  for (std::size_t a = 0; a < axes.size(); ++a)
    for (std::size_t b = a + 1; b < axes.size(); ++b)
      for (const SweptPath& first : axes[a].paths)
        for (const SweptPath& second : axes[b].paths)
          if (overlap(first.path, second.path))
            diagnostics.error(second.where, "'" + second.path + "' is swept by two axes of [sweep], '" +
                                                axes[a].name + "' (at " + first.where + ") and '" + axes[b].name +
                                                "': every run would be labelled by one and run with the other");
}

// The entries of a table in the order they are written (toml++ keeps keys
// sorted); a value replaced by --set keeps the place of the one it replaced.
std::vector<std::pair<std::string, const toml::node*>> in_written_order(const TomlDocument& document,
                                                                        const toml::table& table) {
  std::vector<std::pair<std::string, const toml::node*>> entries;
  for (auto&& [key, value] : table) entries.emplace_back(std::string(key.str()), &value);
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& a, const auto& b) {
    const toml::source_position x = document.written_at(*a.second);
    const toml::source_position y = document.written_at(*b.second);
    return x.line != y.line ? x.line < y.line : x.column < y.column;
  });
  return entries;
}

bool is_config_path(const std::string& name) { return name.find('.') != std::string::npos; }

// A table of named variants, each a table of config paths and values.
void read_variants(const TomlDocument& document, const std::string& name, const toml::table& variants,
                   Axis& axis, Diagnostics& diagnostics) {
  for (const auto& [variant, settings_node] : in_written_order(document, variants)) {
    const toml::table* settings = settings_node->as_table();
    if (settings == nullptr || settings->empty()) {
      diagnostics.error(document.where(*settings_node),
                        "variant '" + variant + "' of [sweep." + name +
                            "] must be a table of config paths and values, like \"scheduler.allocation\" = "
                            "{ plugin = \"fifo\" }");
      continue;
    }
    AxisValue choice{{}, variant};
    std::vector<std::string> set;  // by this variant
    for (const auto& [path, setting] : in_written_order(document, *settings)) {
      if (!is_config_path(path))
        diagnostics.error(document.where(*setting), "'" + path + "' in [sweep." + name + "." + variant +
                                                        "] is not a quoted config path like "
                                                        "\"scheduler.allocation\"");
      for (const std::string& earlier : set)
        if (overlap(earlier, path))
          diagnostics.error(document.where(*setting), "'" + path + "' in [sweep." + name + "." + variant +
                                                          "] sets part of what '" + earlier +
                                                          "' sets in the same variant; set it in one of them");
      set.push_back(path);
      choice.overrides.push_back(path + "=" + toml_text(*setting));
      if (std::none_of(axis.paths.begin(), axis.paths.end(), [&](const SweptPath& p) { return p.path == path; }))
        axis.paths.push_back({path, document.where(*setting)});
    }
    axis.values.push_back(std::move(choice));
  }
}

}  // namespace

std::vector<SweepPoint> expand_sweep(const TomlDocument& document) {
  const toml::node* sweep_node = document.root().get("sweep");
  if (sweep_node == nullptr) return {SweepPoint{{}, "{}", {}}};
  Diagnostics diagnostics;
  const toml::table* sweep = sweep_node->as_table();
  if (sweep == nullptr) throw ConfigError(document.where(*sweep_node), "[sweep] must be a table");

  // The axes follow the order they are written in.
  std::vector<Axis> axes;
  for (const auto& [name, node] : in_written_order(document, *sweep)) {
    const toml::node& value = *node;
    const bool seeds = name == "seeds";
    Axis axis{seeds ? "seed" : name, {}};
    const toml::table* table = seeds ? nullptr : value.as_table();
    if (table != nullptr && !is_config_path(name)) {
      if (name == "seed") {  // the seeds' axis: its label would be overwritten
        diagnostics.error(document.where(value), "[sweep.seed] would hide the seeds' axis; name the variants' "
                                                 "axis something else, like [sweep.policy]");
        continue;
      }
      axis.named = true;
      read_variants(document, name, *table, axis, diagnostics);
      if (axis.values.empty()) diagnostics.error(document.where(value), "[sweep." + name + "] names no variants");
      else axes.push_back(std::move(axis));
      continue;
    }
    const std::string path = seeds ? "workload.seed" : name;
    if (!seeds && !is_config_path(name))
      diagnostics.error(document.where(value), "'" + name + "' in [sweep] is not a config path like "
                                                            "\"workload.jobs_per_hour\", 'seeds', or a table "
                                                            "of named variants");
    axis.paths.push_back({path, document.where(value)});
    if (const toml::array* list = value.as_array(); list != nullptr && !list->empty()) {
      for (const toml::node& element : *list) {
        const std::string setting = path + "=" + toml_text(element);
        if (std::any_of(axis.values.begin(), axis.values.end(),
                        [&](const AxisValue& v) { return v.overrides.front() == setting; }))
          diagnostics.error(document.where(element), "'" + name + "' in [sweep] lists " + toml_text(element) +
                                                         " twice: its runs would be one point, run twice");
        axis.values.push_back({{setting}, json_value(element)});
      }
    } else if (table != nullptr && !table->empty()) {
      axis.named = true;
      for (const auto& [value_name, element] : in_written_order(document, *table))
        axis.values.push_back({{path + "=" + toml_text(*element)}, value_name});
    } else {
      diagnostics.error(document.where(value), "'" + name + "' in [sweep] must be a non-empty list of values" +
                                                   (seeds ? "" : " or a table of named values"));
      continue;
    }
    axes.push_back(std::move(axis));
  }
  check_distinct(axes, diagnostics);
  diagnostics.raise_if_any();
  // `seeds` varies fastest, whatever its position, so that a point's seeds sit together.
  std::stable_partition(axes.begin(), axes.end(), [](const Axis& a) { return a.name != "seed"; });

  std::string named_values;
  for (const Axis& axis : axes)
    if (axis.named)
      for (const AxisValue& value : axis.values) {
        named_values += axis.name + "." + value.label.get<std::string>() + ":";
        for (const std::string& setting : value.overrides) named_values += " " + setting;
        named_values += "\n";
      }

  std::vector<SweepPoint> points;
  std::vector<std::size_t> index(axes.size(), 0);
  while (true) {
    SweepPoint point;
    nlohmann::ordered_json labels = nlohmann::ordered_json::object();  // axes in sweep order
    for (std::size_t a = 0; a < axes.size(); ++a) {
      const AxisValue& value = axes[a].values[index[a]];
      point.overrides.insert(point.overrides.end(), value.overrides.begin(), value.overrides.end());
      labels[axes[a].name] = value.label;
    }
    point.axes = labels.dump();
    point.named_values = named_values;
    points.push_back(std::move(point));
    std::size_t a = axes.size();
    while (a > 0 && ++index[a - 1] == axes[a - 1].values.size()) index[--a] = 0;
    if (a == 0) break;
  }
  return points;
}

std::string without_sweep(const TomlDocument& document) {
  toml::table copy = document.root();
  copy.erase("sweep");
  std::ostringstream out;
  out << copy;
  return out.str();
}

namespace {

// What a run's results depend on: the document without [sweep] and [output].
toml::table results_relevant(toml::table table) {
  table.erase("sweep");
  table.erase("output");
  return table;
}

std::string node_text(const toml::node& node) {
  std::ostringstream out;
  node.visit([&](auto&& value) { out << value; });
  return out.str();
}

void collect_differences(const toml::table& a, const toml::table& b, const std::string& prefix,
                         std::vector<std::string>& out) {
  std::set<std::string> keys;
  for (auto&& [key, value] : a) keys.emplace(key.str());
  for (auto&& [key, value] : b) keys.emplace(key.str());
  for (const std::string& key : keys) {
    const toml::node* x = a.get(key);
    const toml::node* y = b.get(key);
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    if (x != nullptr && y != nullptr && x->is_table() && y->is_table())
      collect_differences(*x->as_table(), *y->as_table(), path, out);
    else if (x == nullptr || y == nullptr || node_text(*x) != node_text(*y))
      out.push_back(path);
  }
}

}  // namespace

std::string configuration_fingerprint(const TomlDocument& document, const SweepPoint& point) {
  toml::table relevant = results_relevant(document.root());
  for (const std::string& setting : point.overrides) {
    const auto path = config_path_segments(std::string_view(setting).substr(0, setting.find('=')));
    if (!path) continue;
    toml::table* table = &relevant;
    for (std::size_t i = 0; table != nullptr && i + 1 < path->size(); ++i) {
      toml::node* next = table->get((*path)[i]);
      table = next != nullptr ? next->as_table() : nullptr;
    }
    if (table != nullptr) table->erase(path->back());
  }
  std::ostringstream text;
  text << relevant << '\n' << point.named_values;  // tables print their keys in order: one text per configuration
  std::uint64_t hash = 14695981039346656037ull;  // FNV-1a
  for (const unsigned char c : text.str()) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

std::vector<std::string> differing_keys(const std::string& config_a, const std::string& config_b) {
  std::vector<std::string> out;
  try {
    collect_differences(results_relevant(toml::parse(config_a)), results_relevant(toml::parse(config_b)), "", out);
  } catch (const toml::parse_error&) {
    out.push_back("(a stored configuration that does not parse)");
  }
  return out;
}

}  // namespace tessel
