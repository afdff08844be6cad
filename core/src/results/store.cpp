#include "results/store.hpp"

#include <array>
#include <ctime>
#include <filesystem>
#include <limits>
#include <set>
#include <type_traits>
#include <variant>

#include "build_config.hpp"
#include "engine/errors.hpp"

namespace tessel {

namespace {

// "tssl": marks a file as a tessel results database.
constexpr std::int64_t kApplicationId = 0x7473736c;

// migrations[i] takes the schema from version i to i + 1.
const std::array<const char*, kSchemaVersion> kMigrations = {
    // 0 -> 1: runs and what they produce.
    R"sql(
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  label TEXT NOT NULL DEFAULT '',
  axes TEXT NOT NULL DEFAULT '{}',
  config TEXT NOT NULL,
  seed INTEGER NOT NULL,
  version TEXT NOT NULL,
  mode TEXT NOT NULL,
  started_at TEXT NOT NULL,
  wall_seconds REAL,
  status TEXT NOT NULL CHECK (status IN ('running', 'complete', 'failed', 'interrupted')),
  note TEXT NOT NULL DEFAULT '',
  cluster_gpus INTEGER,
  capacity_gpu_seconds REAL,
  end_time REAL,
  events INTEGER
);
CREATE TABLE jobs (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  job_id INTEGER NOT NULL,
  name TEXT NOT NULL, tenant TEXT NOT NULL, vc TEXT NOT NULL, model TEXT NOT NULL,
  arrival REAL NOT NULL,
  first_start REAL,
  finish REAL,
  gpus INTEGER NOT NULL, min_gpus INTEGER NOT NULL, max_gpus INTEGER NOT NULL,
  total_work REAL NOT NULL, executed_work REAL NOT NULL,
  attained_service REAL NOT NULL, gpu_seconds REAL NOT NULL,
  preemptions INTEGER NOT NULL, attempts INTEGER NOT NULL,
  status TEXT NOT NULL,
  tracked INTEGER NOT NULL,
  PRIMARY KEY (run_id, job_id)
) WITHOUT ROWID;
CREATE TABLE samples (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  time REAL NOT NULL,
  total_gpus INTEGER NOT NULL, busy_gpus INTEGER NOT NULL,
  running_jobs INTEGER NOT NULL, waiting_jobs INTEGER NOT NULL, pending_jobs INTEGER NOT NULL
);
CREATE INDEX samples_by_run ON samples(run_id, time);
CREATE TABLE decisions (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  time REAL NOT NULL,
  job_id INTEGER NOT NULL,
  stage TEXT NOT NULL, plugin TEXT NOT NULL, code TEXT NOT NULL, reason TEXT NOT NULL
);
CREATE INDEX decisions_by_job ON decisions(run_id, job_id, time);
CREATE TABLE metrics (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  value REAL,
  PRIMARY KEY (run_id, name)
) WITHOUT ROWID;
)sql",
    // 1 -> 2: elastic jobs' resizes.
    R"sql(
CREATE TABLE resizes (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  time REAL NOT NULL,
  job_id INTEGER NOT NULL,
  from_gpus INTEGER NOT NULL,
  to_gpus INTEGER NOT NULL,
  cost_seconds REAL NOT NULL,
  batch_size INTEGER NOT NULL,
  tensor_parallel INTEGER NOT NULL,
  pipeline_parallel INTEGER NOT NULL
);
CREATE INDEX resizes_by_job ON resizes(run_id, job_id, time);
)sql",
    // 2 -> 3: the real-cluster daemon's own state (runners/cluster/journal.hpp),
    // beside the `jobs` rows it keeps up to date like a simulation's.
    R"sql(
CREATE TABLE cluster_runs (
  run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  epoch REAL NOT NULL
);
CREATE TABLE cluster_jobs (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  job_id INTEGER NOT NULL,
  command TEXT NOT NULL,
  env TEXT NOT NULL,
  workdir TEXT NOT NULL,
  iterations INTEGER,
  processes TEXT NOT NULL CHECK (processes IN ('per_gpu', 'per_node')),
  grace_seconds REAL NOT NULL,
  submitted_at TEXT NOT NULL,
  PRIMARY KEY (run_id, job_id)
) WITHOUT ROWID;
CREATE TABLE cluster_launches (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  launch_id INTEGER NOT NULL,
  job_id INTEGER NOT NULL,
  decided REAL NOT NULL,
  resume INTEGER NOT NULL,
  ended REAL,
  outcome TEXT,
  PRIMARY KEY (run_id, launch_id)
) WITHOUT ROWID;
CREATE INDEX cluster_launches_by_job ON cluster_launches(run_id, job_id);
CREATE TABLE cluster_ranks (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  launch_id INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  node TEXT NOT NULL,
  gpus TEXT NOT NULL,
  pid INTEGER,
  started REAL,
  exit_code INTEGER,
  signal INTEGER,
  PRIMARY KEY (run_id, launch_id, rank)
) WITHOUT ROWID;
CREATE TABLE cluster_nodes (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  address TEXT NOT NULL,
  gpus INTEGER NOT NULL,
  gpu_type TEXT NOT NULL,
  cpus REAL NOT NULL,
  mem_gb REAL NOT NULL,
  up INTEGER NOT NULL,
  last_seen REAL NOT NULL,
  PRIMARY KEY (run_id, name)
) WITHOUT ROWID;
)sql",
    // 3 -> 4: what each job held when the run ended, for the GPU allocation figure.
    R"sql(
ALTER TABLE jobs ADD COLUMN gpu_milli INTEGER NOT NULL DEFAULT 1000;
ALTER TABLE jobs ADD COLUMN held_gpus INTEGER NOT NULL DEFAULT 0;
)sql",
    // 4 -> 5: the configuration's fingerprint, so that runs of different
    // configurations are never taken for one another; jobs keep their
    // priority (add_job_columns).
    R"sql(
ALTER TABLE runs ADD COLUMN fingerprint TEXT NOT NULL DEFAULT '';
)sql",
    // 5 -> 6: the metrics take the names of the one list of figures
    // (summary.hpp), which `report` prints and reads back.
    R"sql(
UPDATE metrics SET name = name || '_s'
 WHERE name IN ('avg_jct', 'p50_jct', 'p95_jct', 'p99_jct', 'avg_queueing_delay', 'makespan');
)sql",
    // 6 -> 7: each launch's MASTER_PORT, so that a restarted daemon knows the
    // ports its adopted launches hold. NULL: not dispatched, or an older daemon's.
    R"sql(
ALTER TABLE cluster_launches ADD COLUMN master_port INTEGER;
)sql",
    // 7 -> 8: space sharing: GPUs holding several jobs in each sample; each
    // job's time on shared GPUs (add_job_columns).
    R"sql(
ALTER TABLE samples ADD COLUMN shared_gpus INTEGER NOT NULL DEFAULT 0;
)sql"};

void add_job_columns(sql::Database& db);  // below, with the columns

// What the migrations above and add_job_columns leave in a new file, statement
// for statement as SQLite stores it (sqlite_master.sql, same order): a new
// file gets it in one script. Each ALTER TABLE re-reads the whole schema, so
// the migrations cost a fresh database several times its run's other
// statements (issue 17). A new migration changes this text too; the test
// "a new database's schema is the migrated one" (test_startup_paths.cpp)
// compares the two.
constexpr const char* kCurrentSchema = R"sql(CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  label TEXT NOT NULL DEFAULT '',
  axes TEXT NOT NULL DEFAULT '{}',
  config TEXT NOT NULL,
  seed INTEGER NOT NULL,
  version TEXT NOT NULL,
  mode TEXT NOT NULL,
  started_at TEXT NOT NULL,
  wall_seconds REAL,
  status TEXT NOT NULL CHECK (status IN ('running', 'complete', 'failed', 'interrupted')),
  note TEXT NOT NULL DEFAULT '',
  cluster_gpus INTEGER,
  capacity_gpu_seconds REAL,
  end_time REAL,
  events INTEGER
, fingerprint TEXT NOT NULL DEFAULT '');
CREATE TABLE jobs (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  job_id INTEGER NOT NULL,
  name TEXT NOT NULL, tenant TEXT NOT NULL, vc TEXT NOT NULL, model TEXT NOT NULL,
  arrival REAL NOT NULL,
  first_start REAL,
  finish REAL,
  gpus INTEGER NOT NULL, min_gpus INTEGER NOT NULL, max_gpus INTEGER NOT NULL,
  total_work REAL NOT NULL, executed_work REAL NOT NULL,
  attained_service REAL NOT NULL, gpu_seconds REAL NOT NULL,
  preemptions INTEGER NOT NULL, attempts INTEGER NOT NULL,
  status TEXT NOT NULL,
  tracked INTEGER NOT NULL, gpu_milli INTEGER NOT NULL DEFAULT 1000, held_gpus INTEGER NOT NULL DEFAULT 0, priority REAL NOT NULL DEFAULT 1, shared_seconds REAL NOT NULL DEFAULT 0,
  PRIMARY KEY (run_id, job_id)
) WITHOUT ROWID;
CREATE TABLE samples (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  time REAL NOT NULL,
  total_gpus INTEGER NOT NULL, busy_gpus INTEGER NOT NULL,
  running_jobs INTEGER NOT NULL, waiting_jobs INTEGER NOT NULL, pending_jobs INTEGER NOT NULL
, shared_gpus INTEGER NOT NULL DEFAULT 0);
CREATE INDEX samples_by_run ON samples(run_id, time);
CREATE TABLE decisions (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  time REAL NOT NULL,
  job_id INTEGER NOT NULL,
  stage TEXT NOT NULL, plugin TEXT NOT NULL, code TEXT NOT NULL, reason TEXT NOT NULL
);
CREATE INDEX decisions_by_job ON decisions(run_id, job_id, time);
CREATE TABLE metrics (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  value REAL,
  PRIMARY KEY (run_id, name)
) WITHOUT ROWID;
CREATE TABLE resizes (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  time REAL NOT NULL,
  job_id INTEGER NOT NULL,
  from_gpus INTEGER NOT NULL,
  to_gpus INTEGER NOT NULL,
  cost_seconds REAL NOT NULL,
  batch_size INTEGER NOT NULL,
  tensor_parallel INTEGER NOT NULL,
  pipeline_parallel INTEGER NOT NULL
);
CREATE INDEX resizes_by_job ON resizes(run_id, job_id, time);
CREATE TABLE cluster_runs (
  run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  epoch REAL NOT NULL
);
CREATE TABLE cluster_jobs (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  job_id INTEGER NOT NULL,
  command TEXT NOT NULL,
  env TEXT NOT NULL,
  workdir TEXT NOT NULL,
  iterations INTEGER,
  processes TEXT NOT NULL CHECK (processes IN ('per_gpu', 'per_node')),
  grace_seconds REAL NOT NULL,
  submitted_at TEXT NOT NULL,
  PRIMARY KEY (run_id, job_id)
) WITHOUT ROWID;
CREATE TABLE cluster_launches (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  launch_id INTEGER NOT NULL,
  job_id INTEGER NOT NULL,
  decided REAL NOT NULL,
  resume INTEGER NOT NULL,
  ended REAL,
  outcome TEXT, master_port INTEGER,
  PRIMARY KEY (run_id, launch_id)
) WITHOUT ROWID;
CREATE INDEX cluster_launches_by_job ON cluster_launches(run_id, job_id);
CREATE TABLE cluster_ranks (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  launch_id INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  node TEXT NOT NULL,
  gpus TEXT NOT NULL,
  pid INTEGER,
  started REAL,
  exit_code INTEGER,
  signal INTEGER,
  PRIMARY KEY (run_id, launch_id, rank)
) WITHOUT ROWID;
CREATE TABLE cluster_nodes (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  address TEXT NOT NULL,
  gpus INTEGER NOT NULL,
  gpu_type TEXT NOT NULL,
  cpus REAL NOT NULL,
  mem_gb REAL NOT NULL,
  up INTEGER NOT NULL,
  last_seen REAL NOT NULL,
  PRIMARY KEY (run_id, name)
) WITHOUT ROWID;
)sql";


std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

}  // namespace

void create_database_folder(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) return;
  std::error_code error;
  std::filesystem::create_directories(parent, error);
  if (error)
    throw UserError(path + ": cannot create its folder '" + parent.string() + "': " + error.message());
}

ResultsStore::ResultsStore(const std::string& path, bool create) : path_(path) {
  try {
    try {
      db_ = sql::Database(path, create);
      migrate(create);
    } catch (const sql::StorageError& e) {
      // A finished database in a folder this user cannot write: SQLite cannot
      // create its WAL index (-shm) there, so a reader opens it as a file
      // nobody writes. Not while a -wal file beside it may hold rows.
      if (create || e.code() != SQLITE_CANTOPEN || !std::filesystem::exists(path) ||
          std::filesystem::exists(path + "-wal"))
        throw;
      db_ = sql::Database::immutable(path);
      migrate(create);
    }
  } catch (const sql::Error& e) {
    throw UserError(path + ": " + e.what());
  }
}

OpeningStore::OpeningStore(std::string path)
    : opened_(std::async(std::launch::async, [this, path = std::move(path)] {
        store_ = std::make_unique<ResultsStore>(path);
      })) {}

ResultsStore& OpeningStore::get() const {
  opened_.get();
  return *store_;
}

std::span<const char* const> schema_migrations() { return kMigrations; }

std::int64_t schema_version(sql::Database& db, const std::string& path) {
  // One statement, so one snapshot: read one by one, the three could
  // straddle another process's creation of the schema.
  std::int64_t version = 0, application = 0, tables = 0;
  try {
    auto header = db.prepare("SELECT (SELECT user_version FROM pragma_user_version), "
                             "(SELECT application_id FROM pragma_application_id), (SELECT count(*) FROM sqlite_master)");
    if (header.step()) {
      version = header.integer(0);
      application = header.integer(1);
      tables = header.integer(2);
    }
  } catch (const sql::Error& e) {
    if (e.code() == SQLITE_NOTADB) throw UserError(path + ": not an SQLite database");
    throw;
  }
  if (application != kApplicationId && (tables > 0 || version > 0))
    throw UserError(path + ": not a tessel results database");
  // Only another program sets these: no migration starts from them.
  if (version < 0 || (version == 0 && tables > 0))
    throw UserError(path + ": a tessel results database whose schema version (" + std::to_string(version) +
                    ") was changed by another program; tessel cannot tell which tables it has");
  return version;
}

void ResultsStore::migrate(bool create) {
  std::int64_t version = schema_version(db_, path_);
  // A file that exists, empty, is a database only if this call may create one.
  if (version == 0 && !create) {
    // An SQLite database without tables: one a full disk stopped before its
    // schema, or one another program made.
    std::error_code error;
    const bool empty_file = std::filesystem::file_size(path_, error) == 0 && !error;
    throw UserError(path_ + (empty_file ? ": an empty file" : ": a database without tables") +
                    ", not a results database");
  }
  const auto refuse_newer = [&] {
    if (version > kSchemaVersion)
      throw UserError(path_ + ": written by a newer tessel (schema " + std::to_string(version) +
                      ", this tessel knows up to " + std::to_string(kSchemaVersion) + ")");
  };
  refuse_newer();
  if (version == kSchemaVersion && db_.read_only()) return;  // nothing to set or upgrade
  // A new database's pages are 8 KiB, not SQLite's 4: a run's rows append
  // to B-trees keyed by (run, job) and (run, time), which SQLite rebalances
  // at their last pages each time one fills, and a run's end writes and
  // checkpoints its WAL a frame to a call (a Figure 6 point, 5,000 job
  // rows: rebalancing 0.90x the instructions, the process 0.98-0.99x the
  // wall time; 16 KiB no faster, 64 KiB slower; bench/startup.cpp). The
  // real-node journal's many small commits are no slower for it
  // (bench/cluster_loopback, both builds in turn). Only before the first
  // write: the size of a database with pages is set for good.
  if (version == 0) db_.exec("PRAGMA page_size=8192");
  // Synchronous first: switching a new database to WAL is itself a
  // rollback-journal transaction, which NORMAL commits with one sync of the
  // journal fewer than the default FULL.
  db_.exec("PRAGMA synchronous=NORMAL");
  db_.exec("PRAGMA journal_mode=WAL");
  db_.exec("PRAGMA foreign_keys=ON");
  if (version == kSchemaVersion) return;
  sql::Transaction transaction(db_);
  // Read again under the write lock: another process creating the same new
  // database may have done it since.
  version = schema_version(db_, path_);
  refuse_newer();
  if (version == kSchemaVersion) return;  // the transaction rolls back, having written nothing
  if (version == 0) {
    db_.exec(kCurrentSchema);
  } else {
    try {
      for (std::int64_t v = version; v < kSchemaVersion; ++v) db_.exec(kMigrations[v]);
      add_job_columns(db_);
    } catch (const sql::Error& e) {  // its tables are not what its version says
      throw UserError(path_ + ": cannot upgrade its schema from version " + std::to_string(version) + " to " +
                      std::to_string(kSchemaVersion) + ": " + e.what());
    }
  }
  db_.exec("PRAGMA application_id=" + std::to_string(kApplicationId));
  db_.exec("PRAGMA user_version=" + std::to_string(kSchemaVersion));
  transaction.commit();
}

std::int64_t ResultsStore::begin_run(const RunInfo& info) {
  std::lock_guard lock(mutex_);
  auto insert = db_.prepare(
      "INSERT INTO runs (label, axes, config, seed, version, mode, started_at, status, fingerprint) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?)");
  insert.bind(1, info.label)
      .bind(2, info.axes)
      .bind(3, info.config)
      .bind(4, static_cast<std::int64_t>(info.seed))
      .bind(5, std::string_view(kVersion))
      .bind(6, info.mode)
      .bind(7, utc_now())
      .bind(8, info.fingerprint);
  insert.run();
  return db_.last_insert_id();
}

namespace {

// "a, b, c": the names of a table's columns.
template <class Columns>
std::string column_list(const Columns& columns) {
  std::string text;
  for (const auto& column : columns) text += (text.empty() ? "" : ", ") + std::string(column.name);
  return text;
}

}  // namespace

const std::string& job_row_columns() {
  static const std::string columns = column_list(kJobColumns);
  return columns;
}

int job_row_column_count() { return static_cast<int>(std::size(kJobColumns)); }

namespace {

// The columns of kJobColumns that an older database's `jobs` lacks, added
// with their defaults (part of each migration).
void add_job_columns(sql::Database& db) {
  std::set<std::string> present;
  auto columns = db.prepare("SELECT name FROM pragma_table_info('jobs')");
  while (columns.step()) present.insert(columns.text(0));
  for (const JobColumn& column : kJobColumns)
    if (!present.contains(column.name))
      db.exec("ALTER TABLE jobs ADD COLUMN " + std::string(column.name) + " " + column.sql_type);
}

}  // namespace

namespace {

// "INSERT ... INTO jobs (run_id, job_id, ...)": the start of both of
// RunRows's statements that write a job's row.
std::string job_row_insert(std::string_view insert) {
  return std::string(insert) + " INTO jobs (run_id, " + job_row_columns() + ")";
}

// " VALUES (?, ?, ?)": one row of `columns` parameters.
std::string parameter_row(std::size_t columns) {
  std::string text = " VALUES (?";
  for (std::size_t i = 1; i < columns; ++i) text += ", ?";
  return text + ")";
}

// A row's member as SQLite stores it: an integer, a real, a real or NULL,
// or a text (not copied: the row outlives the statement's run).
template <class Value>
auto stored(const Value& value) {
  if constexpr (std::is_same_v<Value, std::string>)
    return std::string_view(value);
  else if constexpr (std::is_same_v<Value, double> || std::is_same_v<Value, std::optional<double>>)
    return value;
  else
    return static_cast<std::int64_t>(value);
}

// Binds `j` as the job row. Its texts are bound without a copy: `j`
// outlives the statement's run (RunRows::job runs it before returning).
void bind_job(sql::Statement& statement, std::int64_t run, const JobRecord& j) {
  statement.bind(1, run);
  int index = 2;
  for (const JobColumn& column : kJobColumns) {
    std::visit(
        [&](auto member) {
          const auto value = stored(j.*member);
          if constexpr (std::is_same_v<decltype(value), const std::string_view>)
            statement.bind_unowned(index, value);
          else
            statement.bind(index, value);
        },
        column.field);
    ++index;
  }
}

// The `samples` table after run_id, in its order.
struct SampleColumn {
  const char* name;
  std::variant<double Sample::*, int Sample::*> field;
};
constexpr SampleColumn kSampleColumns[] = {
    {"time", &Sample::time},          {"total_gpus", &Sample::total_gpus},     {"busy_gpus", &Sample::busy_gpus},
    {"running_jobs", &Sample::running_jobs}, {"waiting_jobs", &Sample::waiting_jobs},
    {"pending_jobs", &Sample::pending_jobs}, {"shared_gpus", &Sample::shared_gpus}};

void bind_sample(sql::Statement& statement, std::int64_t run, const Sample& s) {
  statement.bind(1, run);
  int index = 2;
  for (const SampleColumn& column : kSampleColumns)
    std::visit([&](auto member) { statement.bind(index++, stored(s.*member)); }, column.field);
}

// A finished simulation's thousands of rows reach SQLite as a table of this
// connection that reads them from memory (a virtual table, its rows a span
// given as a pointer parameter): one `INSERT ... SELECT` writes them all.
// Bound as parameters instead, each value costs SQLite a bind, a copy into the
// statement's registers and, 64 rows to a statement, a ~1,500-parameter
// statement to prepare and clear: a fifth of the cost of storing a row.
// What a row source needs of its rows' type: its name as SQL sees it, the
// pointer's type, and how one value of a row goes to SQLite.
template <class Row>
struct RowTable {
  const char* name;          // the table-valued function: FROM name(?)
  const char* pointer_type;  // of the span bound to its one argument
  std::string declaration;   // its columns, and the hidden argument last
  int columns;
  // Each column's value of a row, by the column's number.
  const std::span<void (*const)(sqlite3_context*, const Row&)> values;

  struct Table {
    sqlite3_vtab base{};
    const RowTable* table;
  };
  struct Cursor {
    sqlite3_vtab_cursor base{};
    std::span<const Row> rows;
    std::size_t at = 0;
  };

  static int connect(sqlite3* db, void* aux, int, const char* const*, sqlite3_vtab** out, char**) {
    const auto* table = static_cast<const RowTable*>(aux);
    if (const int rc = sqlite3_declare_vtab(db, table->declaration.c_str()); rc != SQLITE_OK) return rc;
    *out = &(new Table{{}, table})->base;
    return SQLITE_OK;
  }
  static int disconnect(sqlite3_vtab* vtab) {
    delete reinterpret_cast<Table*>(vtab);
    return SQLITE_OK;
  }
  // The rows must be given: without its argument the table has none to read.
  static int best_index(sqlite3_vtab* vtab, sqlite3_index_info* info) {
    const int argument = reinterpret_cast<Table*>(vtab)->table->columns;
    for (int i = 0; i < info->nConstraint; ++i) {
      const auto& c = info->aConstraint[i];
      if (c.iColumn == argument && c.op == SQLITE_INDEX_CONSTRAINT_EQ && c.usable) {
        info->aConstraintUsage[i].argvIndex = 1;
        info->aConstraintUsage[i].omit = 1;
        info->estimatedCost = 1;
        return SQLITE_OK;
      }
    }
    return SQLITE_CONSTRAINT;
  }
  static int open(sqlite3_vtab*, sqlite3_vtab_cursor** out) {
    *out = &(new Cursor)->base;
    return SQLITE_OK;
  }
  static int close(sqlite3_vtab_cursor* cursor) {
    delete reinterpret_cast<Cursor*>(cursor);
    return SQLITE_OK;
  }
  static int filter(sqlite3_vtab_cursor* base, int, const char*, int argc, sqlite3_value** argv) {
    auto* cursor = reinterpret_cast<Cursor*>(base);
    const auto* table = reinterpret_cast<Table*>(base->pVtab)->table;
    const auto* rows = argc == 1 ? static_cast<const std::span<const Row>*>(sqlite3_value_pointer(argv[0], table->pointer_type))
                                 : nullptr;
    if (!rows) {
      sqlite3_free(base->pVtab->zErrMsg);
      base->pVtab->zErrMsg = sqlite3_mprintf("%s: no rows given", table->name);
      return SQLITE_ERROR;
    }
    cursor->rows = *rows;
    cursor->at = 0;
    return SQLITE_OK;
  }
  static int next(sqlite3_vtab_cursor* cursor) {
    ++reinterpret_cast<Cursor*>(cursor)->at;
    return SQLITE_OK;
  }
  static int eof(sqlite3_vtab_cursor* base) {
    const auto* cursor = reinterpret_cast<Cursor*>(base);
    return cursor->at >= cursor->rows.size();
  }
  static int column(sqlite3_vtab_cursor* base, sqlite3_context* context, int column) {
    const auto* cursor = reinterpret_cast<Cursor*>(base);
    const auto* table = reinterpret_cast<Table*>(base->pVtab)->table;
    if (column < table->columns) table->values[column](context, cursor->rows[cursor->at]);
    return SQLITE_OK;  // the argument reads as NULL
  }
  static int rowid(sqlite3_vtab_cursor* cursor, sqlite3_int64* out) {
    *out = static_cast<sqlite3_int64>(reinterpret_cast<Cursor*>(cursor)->at);
    return SQLITE_OK;
  }

  // Eponymous only (no xCreate): it exists on each connection that adds it,
  // never in a database file.
  static constexpr sqlite3_module kModule = {
      0,       nullptr, connect, best_index, disconnect, nullptr, open,    close,   filter,  next,    eof,     column,
      rowid,   nullptr, nullptr, nullptr,    nullptr,    nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
};

// SQLite's value of a job's or a sample's column, as bind_job and bind_sample bind it.
void result(sqlite3_context* context, std::int64_t value) { sqlite3_result_int64(context, value); }
void result(sqlite3_context* context, double value) { sqlite3_result_double(context, value); }
void result(sqlite3_context* context, std::optional<double> value) {
  if (value)
    sqlite3_result_double(context, *value);
  else
    sqlite3_result_null(context);
}
void result(sqlite3_context* context, std::string_view value) {
  // SQLITE_STATIC: the rows outlive the statement's run.
  sqlite3_result_text(context, value.data(), static_cast<int>(value.size()), SQLITE_STATIC);
}

template <class Columns>
std::string row_table_declaration(const Columns& columns) {
  std::string text = "CREATE TABLE x(";
  for (const auto& column : columns) text += std::string(column.name) + ", ";
  return text + "rows HIDDEN)";
}

// One function per column of `kColumns`, its member known when compiled:
// no std::visit on each of a run's hundred thousand values.
template <const auto& kColumns, class Row, std::size_t... I>
constexpr auto column_values(std::index_sequence<I...>) {
  return std::array<void (*)(sqlite3_context*, const Row&), sizeof...(I)>{
      [](sqlite3_context* context, const Row& row) {
        constexpr auto field = kColumns[I].field;
        result(context, stored(row.*std::get<field.index()>(field)));
      }...};
}
constexpr auto kJobValues = column_values<kJobColumns, JobRecord>(std::make_index_sequence<std::size(kJobColumns)>());
constexpr auto kSampleValues =
    column_values<kSampleColumns, Sample>(std::make_index_sequence<std::size(kSampleColumns)>());

const RowTable<JobRecord> kJobRows = {"tessel_job_rows", "tessel::JobRecord span", row_table_declaration(kJobColumns),
                                      static_cast<int>(kJobValues.size()), kJobValues};
const RowTable<Sample> kSampleRows = {"tessel_sample_rows", "tessel::Sample span",
                                      row_table_declaration(kSampleColumns), static_cast<int>(kSampleValues.size()),
                                      kSampleValues};

std::string sample_insert() { return "INSERT INTO samples (run_id, " + column_list(kSampleColumns) + ")"; }

// Writes `rows` through `table`, by `insert` ("INSERT ... INTO t (run_id, columns)").
template <class Row, class Columns>
void insert_rows(sql::Database& db, std::optional<sql::Statement>& statement, const RowTable<Row>& table,
                 const Columns& columns, const std::string& insert, std::int64_t run, std::span<const Row> rows) {
  if (rows.empty()) return;
  if (!statement) {
    db.add_module(table.name, RowTable<Row>::kModule, const_cast<RowTable<Row>*>(&table));
    statement.emplace(db.prepare(insert + " SELECT ?, " + column_list(columns) + " FROM " + table.name + "(?)"));
  }
  statement->bind(1, run).bind_pointer(2, &rows, table.pointer_type);
  statement->run();
}

}  // namespace

RunRows::RunRows(sql::Database& db, std::int64_t run)
    : db_(db),
      run_(run),
      job_(db.prepare(job_row_insert("INSERT OR REPLACE") + parameter_row(std::size(kJobColumns) + 1))),
      sample_(db.prepare(sample_insert() + parameter_row(std::size(kSampleColumns) + 1))),
      resize_(db.prepare("INSERT INTO resizes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")),
      decision_(db.prepare("INSERT INTO decisions VALUES (?, ?, ?, ?, ?, ?, ?)")),
      metric_(db.prepare("INSERT OR REPLACE INTO metrics VALUES (?, ?, ?)")),
      totals_(db.prepare("UPDATE runs SET wall_seconds = ?, cluster_gpus = ?, capacity_gpu_seconds = ?, "
                         "end_time = ?, events = ? WHERE id = ?")),
      status_(db.prepare("UPDATE runs SET status = ?, note = ? WHERE id = ?")) {}

void RunRows::job(const JobRecord& j) {
  bind_job(job_, run_, j);
  job_.run();
}

void RunRows::sample(const Sample& s) {
  bind_sample(sample_, run_, s);
  sample_.run();
}

void RunRows::jobs(std::span<const JobRecord> jobs) {
  // A plain INSERT: replacing costs each row a second pass of its NOT NULL
  // checks, and a run's rows at its end are its first.
  insert_rows(db_, jobs_, kJobRows, kJobColumns, job_row_insert("INSERT"), run_, jobs);
}

void RunRows::samples(std::span<const Sample> samples) {
  insert_rows(db_, samples_, kSampleRows, kSampleColumns, sample_insert(), run_, samples);
}

void RunRows::resize(const ResizeRecord& r) {
  resize_.bind(1, run_).bind(2, r.time).bind(3, static_cast<std::int64_t>(r.job)).bind(4, r.from_gpus);
  resize_.bind(5, r.to_gpus).bind(6, r.cost_seconds).bind(7, r.layout.batch_size);
  resize_.bind(8, r.layout.tensor_parallel).bind(9, r.layout.pipeline_parallel);
  resize_.run();
}

void RunRows::decision(const DecisionRecord& d) {
  decision_.bind(1, run_).bind(2, d.time).bind(3, static_cast<std::int64_t>(d.job));
  decision_.bind(4, to_string(d.stage)).bind(5, d.plugin).bind(6, d.code).bind(7, d.reason);
  decision_.run();
}

void RunRows::totals(const RunTotals& t, std::span<const JobRecord> jobs) {
  totals_.bind(1, t.wall_seconds).bind(2, t.cluster_gpus).bind(3, t.capacity_gpu_seconds);
  totals_.bind(4, t.end_time).bind(5, static_cast<std::int64_t>(t.events)).bind(6, run_);
  totals_.run();
  const RunSummary summary = summarize(jobs, t.capacity_gpu_seconds, t.cluster_gpus, t.end_time);
  for (const Figure& figure : figures()) {
    metric_.bind(1, run_).bind(2, std::string_view(figure.name)).bind(3, figure.get(summary));
    metric_.run();
  }
}

void RunRows::status(std::string_view status, std::string_view note) {
  status_.bind(1, status).bind(2, note).bind(3, run_);
  status_.run();
}

JobRecord read_job_row(const sql::Statement& row) {
  JobRecord j;
  int index = 0;
  for (const JobColumn& column : kJobColumns) {
    std::visit(
        [&](auto member) {
          auto& value = j.*member;
          using Value = std::remove_cvref_t<decltype(value)>;
          if constexpr (std::is_same_v<Value, std::string>)
            value = row.text(index);
          else if constexpr (std::is_same_v<Value, std::optional<double>>)
            value = row.optional_real(index);
          else if constexpr (std::is_same_v<Value, double>)
            value = row.real(index);
          else if constexpr (std::is_same_v<Value, bool>)
            value = row.integer(index) != 0;
          else
            value = static_cast<Value>(row.integer(index));
        },
        column.field);
    ++index;
  }
  return j;
}

namespace {

// Every row complete_run writes has one parent, the run's row: checked once,
// instead of by SQLite on each row (two fifths of the cost of the inserts).
// The pragma cannot change inside a transaction, so this wraps it; the
// checks are on again after it, whatever happened.
class ForeignKeysUnchecked {
 public:
  explicit ForeignKeysUnchecked(sql::Database& db) : db_(db) { db_.exec("PRAGMA foreign_keys=OFF"); }
  ForeignKeysUnchecked(const ForeignKeysUnchecked&) = delete;
  ~ForeignKeysUnchecked() {
    try {
      db_.exec("PRAGMA foreign_keys=ON");
    } catch (...) {
    }
  }

 private:
  sql::Database& db_;
};

}  // namespace

void ResultsStore::complete_run(std::int64_t run, const RunResults& results) {
  std::lock_guard lock(mutex_);
  const ForeignKeysUnchecked unchecked(db_);
  sql::Transaction transaction(db_);
  auto parent = db_.prepare("SELECT 1 FROM runs WHERE id = ?");
  parent.bind(1, run);
  if (!parent.step())  // deleted by another process while it ran
    throw UserError(path_ + ": run " + std::to_string(run) + " is no longer in the database; its results were not stored");
  parent.reset();
  RunRows rows(db_, run);
  rows.jobs(results.jobs);
  rows.samples(results.samples);
  for (const DecisionRecord& decision : results.decisions) rows.decision(decision);
  for (const ResizeRecord& resize : results.resizes) rows.resize(resize);
  rows.totals(results, results.jobs);
  rows.status("complete", results.note);
  transaction.commit();
}

void ResultsStore::abandon_run(std::int64_t run, const std::string& status, const std::string& note) {
  std::lock_guard lock(mutex_);
  RunRows(db_, run).status(status, note);
}

namespace {
RunRow read_run(const sql::Statement& s) {
  RunRow row;
  row.id = s.integer(0);
  row.label = s.text(1);
  row.axes = s.text(2);
  row.config = s.text(3);
  row.seed = static_cast<std::uint64_t>(s.integer(4));
  row.version = s.text(5);
  row.mode = s.text(6);
  row.started_at = s.text(7);
  row.wall_seconds = s.real(8);
  row.status = s.text(9);
  row.note = s.text(10);
  row.cluster_gpus = static_cast<int>(s.integer(11));
  row.capacity_gpu_seconds = s.real(12);
  row.end_time = s.real(13);
  row.events = s.integer(14);
  row.fingerprint = s.text(15);
  return row;
}
constexpr const char* kRunColumns =
    "SELECT id, label, axes, config, seed, version, mode, started_at, wall_seconds, status, note, "
    "cluster_gpus, capacity_gpu_seconds, end_time, events, fingerprint FROM runs";
}  // namespace

std::vector<RunRow> ResultsStore::runs() {
  std::lock_guard lock(mutex_);
  auto query = db_.prepare(std::string(kRunColumns) + " ORDER BY id");
  std::vector<RunRow> rows;
  while (query.step()) rows.push_back(read_run(query));
  return rows;
}

std::optional<RunRow> ResultsStore::run(std::int64_t id) {
  std::lock_guard lock(mutex_);
  auto query = db_.prepare(std::string(kRunColumns) + " WHERE id = ?");
  query.bind(1, id);
  if (!query.step()) return std::nullopt;
  return read_run(query);
}

std::vector<JobRecord> ResultsStore::jobs(std::int64_t run) {
  std::lock_guard lock(mutex_);
  auto query = db_.prepare("SELECT " + job_row_columns() + " FROM jobs WHERE run_id = ? ORDER BY job_id");
  query.bind(1, run);
  std::vector<JobRecord> rows;
  while (query.step()) rows.push_back(read_job_row(query));
  return rows;
}

std::vector<Sample> ResultsStore::samples(std::int64_t run) {
  std::lock_guard lock(mutex_);
  auto query = db_.prepare(
      "SELECT time, total_gpus, busy_gpus, running_jobs, waiting_jobs, pending_jobs, shared_gpus FROM samples "
      "WHERE run_id = ? ORDER BY time");
  query.bind(1, run);
  std::vector<Sample> rows;
  while (query.step())
    rows.push_back({query.real(0), static_cast<int>(query.integer(1)), static_cast<int>(query.integer(2)),
                    static_cast<int>(query.integer(3)), static_cast<int>(query.integer(4)),
                    static_cast<int>(query.integer(5)), static_cast<int>(query.integer(6))});
  return rows;
}

std::vector<DecisionRecord> ResultsStore::decisions(std::int64_t run, std::optional<JobId> job) {
  std::lock_guard lock(mutex_);
  auto query = db_.prepare(std::string("SELECT time, job_id, stage, plugin, code, reason FROM decisions "
                                       "WHERE run_id = ?") +
                           (job ? " AND job_id = ?" : "") + " ORDER BY time, rowid");
  query.bind(1, run);
  if (job) query.bind(2, static_cast<std::int64_t>(*job));
  std::vector<DecisionRecord> rows;
  while (query.step()) {
    const std::string stage = query.text(2);
    PluginKind kind = PluginKind::admission;
    for (PluginKind k : {PluginKind::admission, PluginKind::allocation, PluginKind::placement,
                         PluginKind::elasticity})
      if (to_string(k) == stage) kind = k;
    rows.push_back({query.real(0), static_cast<JobId>(query.integer(1)), kind, query.text(3),
                    query.text(4), query.text(5)});
  }
  return rows;
}

std::optional<RunSummary> ResultsStore::figures(std::int64_t run) {
  std::lock_guard lock(mutex_);
  auto query = db_.prepare("SELECT name, value FROM metrics WHERE run_id = ?");
  query.bind(1, run);
  RunSummary summary;
  std::size_t found = 0;
  while (query.step())
    if (const Figure* figure = find_figure(query.text(0))) {
      figure->set(summary, query.is_null(1) ? std::numeric_limits<double>::quiet_NaN() : query.real(1));
      ++found;
    }
  // A run stored by an older tessel may lack figures added since (`unfinished`,
  // `gpu_allocation`): its figures are then computed again from its rows.
  if (found != tessel::figures().size()) return std::nullopt;
  return summary;
}

std::vector<ResizeRecord> ResultsStore::resizes(std::int64_t run) {
  std::lock_guard lock(mutex_);
  auto query = db_.prepare(
      "SELECT time, job_id, from_gpus, to_gpus, cost_seconds, batch_size, tensor_parallel, pipeline_parallel "
      "FROM resizes WHERE run_id = ? ORDER BY time, rowid");
  query.bind(1, run);
  std::vector<ResizeRecord> rows;
  while (query.step())
    rows.push_back({query.real(0), static_cast<JobId>(query.integer(1)), static_cast<int>(query.integer(2)),
                    static_cast<int>(query.integer(3)), query.real(4),
                    JobLayout{static_cast<int>(query.integer(5)), static_cast<int>(query.integer(6)),
                              static_cast<int>(query.integer(7))}});
  return rows;
}

}  // namespace tessel
