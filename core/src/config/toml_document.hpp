// A TOML file plus command-line overrides, read with compiler-style
// diagnostics: every value can say where it came from ("file:line:col" or
// "--set key=value"), and TableReader checks a table against the keys the
// engine reads from it, reporting wrong types, out-of-range values and
// unknown keys with the list of valid ones.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "engine/errors.hpp"

namespace tessel {

class TomlDocument {
 public:
  // Parses `path` and applies `overrides` ("a.b.c=value"; the value is read
  // as TOML, or as a bare string if it is not valid TOML), then
  // `sweep_overrides`, one point of the file's [sweep]: those count as
  // written in the file, so relative paths among them resolve against its
  // directory, and problems name "[sweep]" rather than "--set".
  // Throws ConfigError.
  static TomlDocument load(const std::filesystem::path& path,
                           const std::vector<std::string>& overrides = {},
                           const std::vector<std::string>& sweep_overrides = {});
  // Same, from text already in memory; `name` stands in for the file name.
  static TomlDocument parse(std::string_view text, std::string name,
                            const std::vector<std::string>& overrides = {},
                            const std::vector<std::string>& sweep_overrides = {});

  // A table built in memory (a JSON-lines job, say): its nodes have no
  // position, so every problem is named `name` ("jobs.jsonl:7").
  static TomlDocument of_table(toml::table root, std::string name);

  const toml::table& root() const { return root_; }
  const std::string& name() const { return name_; }
  // Directory that relative input paths in the document are relative to.
  std::filesystem::path base_directory() const;

  std::string where(const toml::node& node) const;
  // Where the node was written in the file; for a value that --set replaced,
  // where the value it replaced was (so that [sweep] axes keep their order).
  toml::source_position written_at(const toml::node& node) const;
  // The effective document (overrides applied), as TOML text.
  std::string text() const;

 private:
  // A config path --set has set, and the override that set it.
  struct SetPath {
    std::vector<std::string> path;
    std::string origin;
  };
  enum class OverrideSource { command_line, sweep };
  // Applies `overrides`; one that sets (part of) what an earlier --set in
  // `set` did is refused, as a field given twice. Adds the --set ones to `set`.
  void apply_overrides(const std::vector<std::string>& overrides, OverrideSource source, std::vector<SetPath>& set);

  toml::table root_;
  std::string name_;
  std::map<const toml::node*, std::string> override_origin_;
  std::map<const toml::node*, toml::source_position> replaced_position_;
};

std::string_view type_name(const toml::node& node);

// The segments of a config path as --set and [sweep] write it
// ("scheduler.allocation.plugin", sweep."workload.jobs"); nullopt for an
// unclosed quote.
std::optional<std::vector<std::string>> config_path_segments(std::string_view key);
// Whether setting one path sets (part of) what the other does: the same
// path, or a table and a key in it ("scheduler.allocation" and
// "scheduler.allocation.plugin").
bool config_paths_overlap(const std::vector<std::string>& a, const std::vector<std::string>& b);

// A table whose keys two rooms know: the config reader reads its own and
// defers the rest to the room that builds from them (a workload kind's keys,
// a throughput model's arguments). That room goes on reading it with
// TableReader(DeferredTable, ...), so that unknown keys are still reported
// once, listing every valid key. The document is kept alive with it.
struct DeferredTable {
  std::shared_ptr<const TomlDocument> document;
  const toml::table* table = nullptr;  // null when absent
  std::string name;                    // as problems name it: "workload", "workload.model"
  std::vector<std::string> read;       // keys read already
};

class TableReader {
 public:
  // `table` may be null when the section is absent: reads return fallbacks,
  // and required reads report the section as missing.
  TableReader(const TomlDocument& document, Diagnostics& diagnostics, const toml::table* table,
              std::string table_name);

  // Goes on reading a deferred table, reporting to `diagnostics`.
  TableReader(const DeferredTable& deferred, Diagnostics& diagnostics);
  // The table, and the keys read so far, for another room to finish;
  // `document` is the one this reader reads.
  DeferredTable defer(std::shared_ptr<const TomlDocument> document) const;

  // A reader for a table nested in this one, reporting to the same place.
  TableReader nested(const toml::table* table, std::string table_name) const {
    return TableReader(document_, diagnostics_, table, std::move(table_name));
  }

  bool present(std::string_view key) const;
  std::string where() const;  // the table itself
  std::string where(std::string_view key) const;
  const std::string& table_name() const { return name_; }
  Diagnostics& diagnostics() const { return diagnostics_; }

  static constexpr std::int64_t kNoMin = std::numeric_limits<std::int64_t>::min();
  static constexpr std::int64_t kNoMax = std::numeric_limits<std::int64_t>::max();

  std::optional<std::int64_t> integer(std::string_view key, std::optional<std::int64_t> fallback,
                                      std::int64_t min = kNoMin, std::int64_t max = kNoMax);
  std::optional<double> number(std::string_view key, std::optional<double> fallback,
                               double min = -std::numeric_limits<double>::infinity(),
                               double max = std::numeric_limits<double>::infinity());
  std::optional<bool> boolean(std::string_view key, std::optional<bool> fallback);
  std::optional<std::string> string(std::string_view key, std::optional<std::string> fallback);
  std::optional<std::string> choice(std::string_view key, const std::vector<std::string>& choices,
                                    std::optional<std::string> fallback);
  std::optional<std::vector<double>> numbers(std::string_view key,
                                             std::optional<std::vector<double>> fallback,
                                             double min = -std::numeric_limits<double>::infinity(),
                                             double max = std::numeric_limits<double>::infinity());
  std::optional<std::vector<std::string>> strings(std::string_view key,
                                                  std::optional<std::vector<std::string>> fallback);
  // A path to an input file: relative paths are relative to the config
  // file's directory (or to the working directory when given with --set).
  std::optional<std::string> input_path(std::string_view key, std::optional<std::string> fallback);
  // A sub-table (or inline table); null when absent or of another type.
  const toml::table* table(std::string_view key);
  // Any node, unchecked: for keys whose type depends on other keys.
  const toml::node* node(std::string_view key);

  // Reports a problem with one key's value.
  void error(std::string_view key, std::string message);
  // Reports every key of the table that no read asked for.
  void finish();
  // finish() stays silent: after an error that hides which keys are valid
  // (an unknown kind), unknown-key reports would only be noise.
  void skip_unknown_keys() { skip_unknown_ = true; }

 private:
  const toml::node* lookup(std::string_view key);
  // Reads one value: the fallback when absent (reported when there is none),
  // else what `extract` makes of the node (reported as not `expected` when nullopt).
  template <class T, class Extract>
  std::optional<T> scalar(std::string_view key, std::optional<T> fallback, std::string_view expected,
                          Extract extract);
  // "in [name]", or "at the top level" for a document's root (a job file).
  std::string scope() const { return name_.empty() ? "at the top level" : "in [" + name_ + "]"; }
  void missing(std::string_view key);
  void wrong_type(std::string_view key, const toml::node& node, std::string_view expected);

  const TomlDocument& document_;
  Diagnostics& diagnostics_;
  const toml::table* table_;
  std::string name_;
  std::set<std::string, std::less<>> known_;
  bool skip_unknown_ = false;
};

}  // namespace tessel
