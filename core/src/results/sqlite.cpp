#include "results/sqlite.hpp"

#include <algorithm>
#include <utility>

namespace tessel::sql {

namespace {

// What the user is told when the storage under a database refuses.
const char* storage_cause(int code) {
  switch (code) {
    case SQLITE_FULL: return "cannot write: the disk is full";
    case SQLITE_READONLY: return "cannot write: the file or its folder is read-only";
    case SQLITE_IOERR: return "cannot read or write: I/O error";
    case SQLITE_CANTOPEN:
      return "cannot open it, or its journal beside it (-wal, -shm): is the folder missing or read-only?";
    case SQLITE_PERM: return "cannot open it: permission denied";
    default: return nullptr;
  }
}

// `file` is the database the error is about, `what` the operation.
[[noreturn]] void raise(const std::string& file, std::string_view what, int code, const std::string& message) {
  const int primary = code & 0xff;
  if (const char* cause = storage_cause(primary))
    throw StorageError(file + ": " + cause + " (" + message + ")", primary);
  throw Error(what.empty() ? message : std::string(what) + ": " + message, primary);
}

std::string file_of(sqlite3* db) {
  const char* file = sqlite3_db_filename(db, "main");
  return file && *file ? file : "the database";
}

[[noreturn]] void fail(sqlite3* db, std::string_view what) {
  if (!db) throw Error(std::string(what) + ": out of memory", SQLITE_NOMEM);
  raise(file_of(db), what, sqlite3_extended_errcode(db), sqlite3_errmsg(db));
}

}  // namespace

Database::Database(const std::string& path, bool create)
    : Database(path, path, SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0)) {}

Database Database::immutable(const std::string& path) {
  // A URI's path is percent-encoded: '?', '#' and '%' would end or escape it.
  std::string uri = "file:";
  for (const char c : path) {
    if (c == '?' || c == '#' || c == '%') {
      static const char* kHex = "0123456789ABCDEF";
      uri += '%';
      uri += kHex[static_cast<unsigned char>(c) >> 4];
      uri += kHex[c & 0xf];
    } else {
      uri += c;
    }
  }
  return Database(path, uri + "?immutable=1", SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
}

void configure_own_process() {
  // SQLite's allocation statistics take a global mutex on every allocation,
  // and tessel reads none of them (0.9% of a Figure 6 point's instructions).
  // They also serve the heap limits a host process may set, so this is for
  // tessel's own processes only, not for Python importing tessel.
  sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

Database::Database(const std::string& path, const std::string& uri, int flags) {
  flags |= SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(uri.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    const int code = db_ ? sqlite3_extended_errcode(db_) : SQLITE_NOMEM;
    const std::string message = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    raise(path, "cannot open database '" + path + "'", code, message);
  }
  sqlite3_extended_result_codes(db_, 1);
  // Several processes (a sweep, `serve` and `report`) may share one file.
  sqlite3_busy_timeout(db_, 30'000);
}

Database& Database::operator=(Database&& other) noexcept {
  if (this != &other) {
    if (db_) sqlite3_close(db_);
    db_ = std::exchange(other.db_, nullptr);
    modules_ = std::move(other.modules_);
  }
  return *this;
}

Database::~Database() {
  if (db_) sqlite3_close(db_);
}

void Database::exec(std::string_view sql) {
  char* message = nullptr;
  if (sqlite3_exec(db_, std::string(sql).c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    const std::string text = message ? message : sqlite3_errmsg(db_);
    sqlite3_free(message);
    raise(file_of(db_), "", sqlite3_extended_errcode(db_), text);
  }
}

void Database::add_module(const char* name, const sqlite3_module& module, void* aux) {
  if (std::find(modules_.begin(), modules_.end(), &module) != modules_.end()) return;
  if (sqlite3_create_module_v2(db_, name, &module, aux, nullptr) != SQLITE_OK) fail(db_, "cannot add a virtual table");
  modules_.push_back(&module);
}

Statement Database::prepare(std::string_view sql) { return Statement(db_, sql); }

Statement::Statement(sqlite3* db, std::string_view sql) {
  if (sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr) != SQLITE_OK)
    fail(db, "cannot prepare statement");
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind(int index, std::int64_t value) {
  if (sqlite3_bind_int64(stmt_, index, value) != SQLITE_OK) fail(sqlite3_db_handle(stmt_), "bind");
  return *this;
}

Statement& Statement::bind(int index, double value) {
  if (sqlite3_bind_double(stmt_, index, value) != SQLITE_OK) fail(sqlite3_db_handle(stmt_), "bind");
  return *this;
}

Statement& Statement::bind(int index, std::string_view value) {
  if (sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT) !=
      SQLITE_OK)
    fail(sqlite3_db_handle(stmt_), "bind");
  return *this;
}

Statement& Statement::bind_unowned(int index, std::string_view value) {
  if (sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_STATIC) != SQLITE_OK)
    fail(sqlite3_db_handle(stmt_), "bind");
  return *this;
}

Statement& Statement::bind(int index, std::optional<double> value) {
  return value ? bind(index, *value) : bind_null(index);
}

Statement& Statement::bind_null(int index) {
  if (sqlite3_bind_null(stmt_, index) != SQLITE_OK) fail(sqlite3_db_handle(stmt_), "bind");
  return *this;
}

Statement& Statement::bind_pointer(int index, const void* pointer, const char* type) {
  if (sqlite3_bind_pointer(stmt_, index, const_cast<void*>(pointer), type, nullptr) != SQLITE_OK)
    fail(sqlite3_db_handle(stmt_), "bind");
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  // Reset after reading the error, so that the statement can be bound and
  // run again: a journal replays its statements after a full disk.
  sqlite3* db = sqlite3_db_handle(stmt_);
  const int code = sqlite3_extended_errcode(db);
  const std::string message = sqlite3_errmsg(db);
  sqlite3_reset(stmt_);
  // Texts bound without a copy may not outlive this failure.
  sqlite3_clear_bindings(stmt_);
  raise(file_of(db), "step", code, message);
}

void Statement::run() {
  while (step()) {
  }
  reset();
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string Statement::text(int column) const {
  const auto* p = sqlite3_column_text(stmt_, column);
  return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(stmt_, column))
           : std::string();
}

}  // namespace tessel::sql
