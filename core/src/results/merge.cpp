#include "results/merge.hpp"

#include <filesystem>
#include <set>

#include "engine/errors.hpp"
#include "results/sqlite.hpp"
#include "results/store.hpp"

namespace tessel {

namespace {

// The columns that say which run a `runs` row is: everything but its id,
// which is the output's own. Compared with IS, which matches NULLs.
constexpr const char* kRunKey[] = {"label",  "axes",       "config",       "seed",     "version", "mode",
                                   "started_at", "status", "wall_seconds", "end_time", "events",  "fingerprint"};

// The columns of `table` in the output database, in their order.
std::vector<std::string> columns_of(sql::Database& db, const std::string& table) {
  std::vector<std::string> columns;
  auto info = db.prepare("SELECT name FROM pragma_table_info(?)");
  info.bind(1, table);
  while (info.step()) columns.push_back(info.text(0));
  return columns;
}

std::string quoted(const std::string& name) { return "\"" + name + "\""; }

}  // namespace

MergeOutcome merge_databases(const std::string& output, const std::vector<std::string>& shards) {
  namespace fs = std::filesystem;
  // Every shard is checked before the output is touched.
  std::set<fs::path> seen;
  std::string other_schema;
  for (const std::string& shard : shards) {
    if (!fs::is_regular_file(shard)) throw UserError(shard + ": no such results database");
    const fs::path canonical = fs::canonical(shard);
    if (fs::exists(output) && fs::equivalent(canonical, output))
      throw UserError(shard + ": is the output database; a shard cannot be merged into itself");
    if (!seen.insert(canonical).second) throw UserError(shard + ": named twice");
    sql::Database db(shard, /*create=*/false);
    const std::int64_t version = schema_version(db, shard);
    if (version != kSchemaVersion)
      other_schema += (other_schema.empty() ? "" : ", ") + shard + " (schema " + std::to_string(version) + ")";
  }
  if (!other_schema.empty())
    throw UserError("refusing to merge shards of another schema than this tessel's (" +
                    std::to_string(kSchemaVersion) + "): " + other_schema);

  create_database_folder(output);
  { ResultsStore created(output); }  // creates it, or brings it up to this schema
  MergeOutcome outcome;
  try {
    sql::Database db(output, /*create=*/false);
    db.exec("PRAGMA foreign_keys=ON");
    // The tables whose rows belong to a run, and their columns.
    std::vector<std::pair<std::string, std::vector<std::string>>> per_run;
    auto tables = db.prepare(
        "SELECT m.name FROM sqlite_master m WHERE m.type = 'table' AND m.name != 'runs' "
        "AND EXISTS (SELECT 1 FROM pragma_table_info(m.name) c WHERE c.name = 'run_id') ORDER BY m.name");
    while (tables.step()) per_run.emplace_back(tables.text(0), std::vector<std::string>{});
    for (auto& [table, columns] : per_run) columns = columns_of(db, table);
    std::vector<std::string> run_columns = columns_of(db, "runs");
    std::erase(run_columns, "id");

    std::string key_match, run_list;
    for (const char* column : kRunKey)
      key_match += std::string(key_match.empty() ? "" : " AND ") + "r." + column + " IS s." + column;
    for (const std::string& column : run_columns) run_list += (run_list.empty() ? "" : ", ") + quoted(column);

    for (const std::string& shard : shards) {
      {
        auto attach = db.prepare("ATTACH DATABASE ? AS shard");
        attach.bind(1, shard);
        attach.run();
      }
      try {
        sql::Transaction transaction(db);
        auto runs = db.prepare(
            "SELECT s.id, s.status, EXISTS (SELECT 1 FROM main.runs r WHERE " + key_match +
            ") FROM shard.runs s ORDER BY s.id");
        auto copy_run = db.prepare("INSERT INTO main.runs (" + run_list + ") SELECT " + run_list +
                                   " FROM shard.runs WHERE id = ?");
        std::vector<sql::Statement> copy_rows;
        for (const auto& [table, columns] : per_run) {
          std::string into, from;
          for (const std::string& column : columns) {
            into += (into.empty() ? "" : ", ") + quoted(column);
            from += std::string(from.empty() ? "" : ", ") + (column == "run_id" ? "?1" : quoted(column));
          }
          copy_rows.push_back(db.prepare("INSERT INTO main." + quoted(table) + " (" + into + ") SELECT " + from +
                                         " FROM shard." + quoted(table) + " WHERE run_id = ?2"));
        }
        while (runs.step()) {
          const std::int64_t id = runs.integer(0);
          if (runs.integer(2) != 0) {
            ++outcome.present;
            continue;
          }
          if (runs.text(1) == "running") {
            outcome.notes.push_back(shard + ": run " + std::to_string(id) +
                                    " is still 'running' (or its process died); left out");
            continue;
          }
          copy_run.bind(1, id);
          copy_run.run();
          const std::int64_t fresh = db.last_insert_id();
          for (sql::Statement& rows : copy_rows) {
            rows.bind(1, fresh).bind(2, id);
            rows.run();
          }
          ++outcome.copied;
        }
        transaction.commit();
      } catch (...) {
        db.exec("DETACH DATABASE shard");
        throw;
      }
      db.exec("DETACH DATABASE shard");
    }
  } catch (const sql::Error& e) {
    throw UserError(output + ": merging: " + e.what());
  }
  return outcome;
}

}  // namespace tessel
