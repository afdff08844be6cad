#include "config/toml_document.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tessel {

namespace {

std::string location(const toml::source_region& region, const std::string& fallback_name) {
  const std::string file = region.path ? *region.path : fallback_name;
  if (region.begin.line == 0) return file;
  return file + ":" + std::to_string(region.begin.line) + ":" + std::to_string(region.begin.column);
}

std::string join(const std::set<std::string, std::less<>>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

std::string shown(const toml::node& node) {
  std::ostringstream out;
  if (const auto* s = node.as_string())
    out << '\'' << s->get() << '\'';
  else
    node.visit([&](auto&& n) { out << n; });
  return out.str();
}

std::string number_text(double x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

}  // namespace

std::string_view type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
  }
}

TomlDocument TomlDocument::load(const std::filesystem::path& path,
                                const std::vector<std::string>& overrides,
                                const std::vector<std::string>& sweep_overrides) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored))  // it would open, and read as an empty file
    throw ConfigError(path.string(), std::string("cannot open config: ") + std::strerror(EISDIR));
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    throw ConfigError(path.string(), std::string("cannot open config: ") + std::strerror(error));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse(text.str(), path.string(), overrides, sweep_overrides);
}

TomlDocument TomlDocument::parse(std::string_view text, std::string name,
                                 const std::vector<std::string>& overrides,
                                 const std::vector<std::string>& sweep_overrides) {
  TomlDocument document;
  document.name_ = std::move(name);
  try {
    document.root_ = toml::parse(text, document.name_);
  } catch (const toml::parse_error& e) {
    throw ConfigError(location(e.source(), document.name_), std::string(e.description()));
  }
  std::vector<SetPath> set;
  document.apply_overrides(overrides, OverrideSource::command_line, set);
  document.apply_overrides(sweep_overrides, OverrideSource::sweep, set);
  return document;
}

TomlDocument TomlDocument::of_table(toml::table root, std::string name) {
  TomlDocument document;
  document.name_ = std::move(name);
  document.root_ = std::move(root);
  return document;
}

std::filesystem::path TomlDocument::base_directory() const {
  return std::filesystem::path(name_).parent_path();
}

std::string TomlDocument::where(const toml::node& node) const {
  if (auto it = override_origin_.find(&node); it != override_origin_.end()) return it->second;
  return location(node.source(), name_);
}

toml::source_position TomlDocument::written_at(const toml::node& node) const {
  if (auto it = replaced_position_.find(&node); it != replaced_position_.end()) return it->second;
  return node.source().begin;
}

std::optional<std::vector<std::string>> config_path_segments(std::string_view key) {
  // Dotted key segments; a quoted segment ("..." or '...') may hold dots,
  // as the [sweep] axes do: sweep."workload.jobs_per_hour"=[2, 4].
  std::vector<std::string> path(1);
  for (std::size_t i = 0; i < key.size(); ++i) {
    const char c = key[i];
    if (c == '.') {
      path.emplace_back();
    } else if (c == '"' || c == '\'') {
      const auto close = key.find(c, i + 1);
      if (close == std::string_view::npos) return std::nullopt;
      path.back() += key.substr(i + 1, close - i - 1);
      i = close;
    } else {
      path.back() += c;
    }
  }
  return path;
}

bool config_paths_overlap(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  const std::size_t common = std::min(a.size(), b.size());
  return std::equal(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(common), b.begin());
}

std::string TomlDocument::text() const {
  std::ostringstream out;
  out << root_;
  return out.str();
}

void TomlDocument::apply_overrides(const std::vector<std::string>& overrides, OverrideSource source,
                                   std::vector<SetPath>& set) {
  // A sweep's values count as written in the file ([sweep] in problems).
  const bool from_sweep = source == OverrideSource::sweep;
  const std::string origin_prefix = from_sweep ? name_ + ": [sweep] " : "--set ";
  Diagnostics diagnostics;
  for (const std::string& override_text : overrides) {
    const std::string origin = origin_prefix + override_text;
    const auto equals = override_text.find('=');
    if (equals == std::string::npos || equals == 0) {
      diagnostics.error(origin, "expected key=value, e.g. --set workload.seed=7");
      continue;
    }
    const auto segments = config_path_segments(std::string_view(override_text).substr(0, equals));
    if (!segments) {
      diagnostics.error(origin, "unclosed quote in the key");
      continue;
    }
    const std::vector<std::string>& path = *segments;
    const std::string value_text = override_text.substr(equals + 1);
    if (std::any_of(path.begin(), path.end(), [](const std::string& segment) { return segment.empty(); })) {
      diagnostics.error(origin, "empty key segment");
      continue;
    }
    // The [sweep]'s own axes are checked against each other when it expands.
    const auto earlier = std::find_if(set.begin(), set.end(),
                                      [&](const SetPath& s) { return config_paths_overlap(s.path, path); });
    if (earlier != set.end()) {
      if (from_sweep) {
        std::string swept;  // the axis's path, as [sweep] quotes it
        for (const std::string& segment : path) swept += (swept.empty() ? "" : ".") + segment;
        diagnostics.error(earlier->origin, "sets what [sweep] sweeps: every run would be labelled by the sweep's "
                                           "value and run with this one; narrow the sweep's axis instead, like "
                                           "--set 'sweep.\"" + swept + "\"=[...]'");
      } else {
        diagnostics.error(origin, "sets what " + earlier->origin + " sets: give each key once");
      }
      continue;
    }
    if (!from_sweep) set.push_back({path, origin});

    toml::table parsed;
    try {
      parsed = toml::parse("v = " + value_text);
    } catch (const toml::parse_error&) {
      parsed.insert_or_assign("v", value_text);  // a bare word is a string
    }

    toml::table* table = &root_;
    bool ok = true;
    for (std::size_t i = 0; i + 1 < path.size() && ok; ++i) {
      if (toml::node* existing = table->get(path[i])) {
        if (!existing->is_table()) {
          diagnostics.error(origin, "'" + path[i] + "' is " + std::string(type_name(*existing)) +
                                        ", not a table");
          ok = false;
        } else {
          table = existing->as_table();
        }
      } else {
        table = table->insert_or_assign(path[i], toml::table{}).first->second.as_table();
        override_origin_[table] = origin;  // a table only this override names is its
      }
    }
    if (!ok) continue;
    std::optional<toml::source_position> replaced;
    if (const toml::node* previous = table->get(path.back())) replaced = written_at(*previous);
    parsed.get("v")->visit([&](auto&& value) {
      table->insert_or_assign(path.back(), std::move(value));
    });
    override_origin_[table->get(path.back())] = origin;
    if (replaced) replaced_position_[table->get(path.back())] = *replaced;
    // Nested nodes of an overriding table or array are located at the override too.
    if (auto* nested = table->get(path.back()); nested->is_array() || nested->is_table()) {
      auto mark = [&](auto& self, toml::node& n) -> void {
        override_origin_[&n] = origin;
        if (auto* a = n.as_array())
          for (auto& e : *a) self(self, e);
        if (auto* t = n.as_table())
          for (auto&& [k, v] : *t) self(self, v);
      };
      mark(mark, *nested);
    }
  }
  diagnostics.raise_if_any();
}

// ------------------------------------------------------------------ TableReader

TableReader::TableReader(const TomlDocument& document, Diagnostics& diagnostics,
                         const toml::table* table, std::string table_name)
    : document_(document), diagnostics_(diagnostics), table_(table), name_(std::move(table_name)) {}

namespace {
const TomlDocument& document_of(const DeferredTable& deferred) {
  if (!deferred.document) throw std::logic_error("a DeferredTable read from no document");
  return *deferred.document;
}
}  // namespace

TableReader::TableReader(const DeferredTable& deferred, Diagnostics& diagnostics)
    : TableReader(document_of(deferred), diagnostics, deferred.table, deferred.name) {
  known_.insert(deferred.read.begin(), deferred.read.end());
}

DeferredTable TableReader::defer(std::shared_ptr<const TomlDocument> document) const {
  if (document.get() != &document_) throw std::logic_error("TableReader::defer: another document");
  return DeferredTable{std::move(document), table_, name_, {known_.begin(), known_.end()}};
}

bool TableReader::present(std::string_view key) const {
  return table_ != nullptr && table_->get(key) != nullptr;
}

std::string TableReader::where() const {
  if (table_ == nullptr || table_->source().begin.line == 0) return document_.name();
  return document_.where(*table_);
}

std::string TableReader::where(std::string_view key) const {
  if (table_ != nullptr)
    if (const toml::node* node = table_->get(key)) return document_.where(*node);
  return where();
}

const toml::node* TableReader::lookup(std::string_view key) {
  known_.emplace(key);
  return table_ == nullptr ? nullptr : table_->get(key);
}

void TableReader::error(std::string_view key, std::string message) {
  diagnostics_.error(where(key), std::move(message));
}

void TableReader::missing(std::string_view key) {
  const bool section_absent = table_ == nullptr;
  diagnostics_.error(where(), section_absent
                                  ? "missing [" + name_ + "] with required key '" + std::string(key) + "'"
                                  : "[" + name_ + "] is missing required key '" + std::string(key) + "'");
}

void TableReader::wrong_type(std::string_view key, const toml::node& node, std::string_view expected) {
  error(key, "'" + std::string(key) + "' " + scope() + " must be " + std::string(expected) +
                 ", got " + std::string(type_name(node)));
}

template <class T, class Extract>
std::optional<T> TableReader::scalar(std::string_view key, std::optional<T> fallback, std::string_view expected,
                                     Extract extract) {
  const toml::node* node = lookup(key);
  if (node == nullptr) {
    if (!fallback) missing(key);
    return fallback;
  }
  std::optional<T> value = extract(*node);
  if (!value) wrong_type(key, *node, expected);
  return value;
}

std::optional<std::int64_t> TableReader::integer(std::string_view key,
                                                 std::optional<std::int64_t> fallback,
                                                 std::int64_t min, std::int64_t max) {
  const bool given = present(key);
  const auto x = scalar<std::int64_t>(key, fallback, "an integer", [](const toml::node& n) {
    return n.is_integer() ? std::optional<std::int64_t>(n.as_integer()->get()) : std::nullopt;
  });
  if (!given || !x || (*x >= min && *x <= max)) return x;
  const std::string range = min == kNoMin   ? "<= " + std::to_string(max)
                            : max == kNoMax ? ">= " + std::to_string(min)
                                            : "in " + std::to_string(min) + ".." + std::to_string(max);
  error(key, "'" + std::string(key) + "' " + scope() + " must be " + range + ", got " + std::to_string(*x));
  return std::nullopt;
}

std::optional<double> TableReader::number(std::string_view key, std::optional<double> fallback,
                                          double min, double max) {
  const bool given = present(key);
  const auto x = scalar<double>(key, fallback, "a number", [](const toml::node& n) -> std::optional<double> {
    if (const auto* i = n.as_integer()) return static_cast<double>(i->get());
    if (const auto* f = n.as_floating_point()) return f->get();
    return std::nullopt;
  });
  if (!given || !x || (std::isfinite(*x) && *x >= min && *x <= max)) return x;
  const std::string range = std::isinf(min) && std::isinf(max) ? ""
                            : std::isinf(min)                    ? "<= " + number_text(max)
                            : std::isinf(max)                    ? ">= " + number_text(min)
                                                                 : "in " + number_text(min) + ".." + number_text(max);
  // A finite value out of range always has a range to be in.
  const std::string wanted = std::isfinite(*x) ? range : "a finite number" + (range.empty() ? "" : " " + range);
  error(key, "'" + std::string(key) + "' " + scope() + " must be " + wanted + ", got " + shown(*table_->get(key)));
  return std::nullopt;
}

std::optional<bool> TableReader::boolean(std::string_view key, std::optional<bool> fallback) {
  return scalar<bool>(key, fallback, "a boolean", [](const toml::node& n) {
    return n.is_boolean() ? std::optional<bool>(n.as_boolean()->get()) : std::nullopt;
  });
}

std::optional<std::string> TableReader::string(std::string_view key, std::optional<std::string> fallback) {
  return scalar<std::string>(key, std::move(fallback), "a string", [](const toml::node& n) {
    return n.is_string() ? std::optional<std::string>(n.as_string()->get()) : std::nullopt;
  });
}

std::optional<std::string> TableReader::choice(std::string_view key,
                                               const std::vector<std::string>& choices,
                                               std::optional<std::string> fallback) {
  auto value = string(key, std::move(fallback));
  if (value && std::find(choices.begin(), choices.end(), *value) == choices.end()) {
    error(key, "unknown " + std::string(key) + " '" + *value + "' " + scope() + " (valid: " +
                   join(choices) + ")");
    return std::nullopt;
  }
  return value;
}

std::optional<std::vector<double>> TableReader::numbers(std::string_view key,
                                                        std::optional<std::vector<double>> fallback,
                                                        double min, double max) {
  const toml::node* node = lookup(key);
  if (node == nullptr) {
    if (!fallback) missing(key);
    return fallback;
  }
  const auto* array = node->as_array();
  if (array == nullptr) {
    wrong_type(key, *node, "an array of numbers");
    return std::nullopt;
  }
  std::vector<double> out;
  for (const toml::node& element : *array) {
    std::optional<double> x;
    if (const auto* i = element.as_integer()) x = static_cast<double>(i->get());
    if (const auto* f = element.as_floating_point()) x = f->get();
    if (!x) {
      diagnostics_.error(document_.where(element), "'" + std::string(key) + "' in [" + name_ +
                                                       "] must hold numbers, got " +
                                                       std::string(type_name(element)));
      return std::nullopt;
    }
    if (!std::isfinite(*x) || *x < min || *x > max) {
      diagnostics_.error(document_.where(element),
                         "'" + std::string(key) + "' " + scope() + " holds " + shown(element) +
                             ", outside " + number_text(min) + ".." + number_text(max));
      return std::nullopt;
    }
    out.push_back(*x);
  }
  return out;
}

std::optional<std::vector<std::string>> TableReader::strings(
    std::string_view key, std::optional<std::vector<std::string>> fallback) {
  const toml::node* node = lookup(key);
  if (node == nullptr) {
    if (!fallback) missing(key);
    return fallback;
  }
  const auto* array = node->as_array();
  if (array == nullptr) {
    wrong_type(key, *node, "an array of strings");
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (const toml::node& element : *array) {
    const auto* s = element.as_string();
    if (s == nullptr) {
      diagnostics_.error(document_.where(element), "'" + std::string(key) + "' in [" + name_ +
                                                       "] must hold strings, got " +
                                                       std::string(type_name(element)));
      return std::nullopt;
    }
    out.push_back(s->get());
  }
  return out;
}

std::optional<std::string> TableReader::input_path(std::string_view key,
                                                   std::optional<std::string> fallback) {
  const bool given = present(key);
  auto path = string(key, std::move(fallback));
  if (!path || !given) return path;
  std::filesystem::path p(*path);
  if (p.is_relative() && !where(key).starts_with("--set")) p = document_.base_directory() / p;
  return p.lexically_normal().string();
}

const toml::table* TableReader::table(std::string_view key) {
  const toml::node* node = lookup(key);
  if (node == nullptr) return nullptr;
  if (const auto* t = node->as_table()) return t;
  wrong_type(key, *node, "a table");
  return nullptr;
}

const toml::node* TableReader::node(std::string_view key) { return lookup(key); }

void TableReader::finish() {
  if (table_ == nullptr || skip_unknown_) return;
  for (auto&& [key, value] : *table_) {
    if (known_.contains(key.str())) continue;
    std::string where_key = key.source().begin.line != 0 ? location(key.source(), document_.name())
                                                         : document_.where(value);
    diagnostics_.error(std::move(where_key), "unknown key '" + std::string(key.str()) + "' " +
                                                 scope() + " (valid: " + join(known_) + ")");
  }
}

}  // namespace tessel
