// A thin RAII layer over the SQLite C API: a connection and prepared
// statements with typed binding. Errors become exceptions carrying SQLite's
// message and code. Where the storage under the file failed (a full disk, a
// read-only file or folder, an I/O error), the error is a StorageError: the
// user's to fix, naming the file and the cause. The rest are sql::Error, and
// the caller decides whether they are the user's (a bad file) or ours.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <utility>

#include <sqlite3.h>

#include "engine/errors.hpp"

namespace tessel::sql {

class Error : public std::runtime_error {
 public:
  Error(const std::string& what, int code) : std::runtime_error(what), code_(code) {}
  // SQLite's primary result code (SQLITE_NOTADB, SQLITE_CONSTRAINT, ...).
  int code() const { return code_; }

 private:
  int code_;
};

// The disk or the file system refused: SQLITE_FULL, SQLITE_READONLY,
// SQLITE_IOERR, SQLITE_CANTOPEN or SQLITE_PERM, with the file named.
class StorageError : public UserError {
 public:
  StorageError(const std::string& what, int code) : UserError(what), code_(code) {}
  int code() const { return code_; }
  // The disk is full: space may come back, so a daemon retries.
  bool disk_full() const { return code_ == SQLITE_FULL; }

 private:
  int code_;
};

// SQLite's settings for a process that is tessel's own (the command line),
// before it first uses SQLite: a process that imports tessel keeps its own.
void configure_own_process();

class Statement;

class Database {
 public:
  Database() = default;
  explicit Database(const std::string& path, bool create = true);
  // Opened read-only as a file nobody writes (SQLite's `immutable`): no WAL
  // index (-shm) is needed beside it, so it reads in a read-only folder.
  static Database immutable(const std::string& path);
  Database(Database&& other) noexcept
      : db_(std::exchange(other.db_, nullptr)), modules_(std::move(other.modules_)) {}
  Database& operator=(Database&& other) noexcept;
  ~Database();

  void exec(std::string_view sql);
  Statement prepare(std::string_view sql);
  std::int64_t last_insert_id() const { return sqlite3_last_insert_rowid(db_); }
  sqlite3* handle() const { return db_; }
  bool read_only() const { return sqlite3_db_readonly(db_, "main") == 1; }
  // Makes `module` (a virtual table of this program, `aux` its client data)
  // a table of this connection named `name`, the first time only: SQLite
  // replaces a module registered again, under statements that may use it.
  void add_module(const char* name, const sqlite3_module& module, void* aux);

 private:
  Database(const std::string& path, const std::string& uri, int flags);
  sqlite3* db_ = nullptr;
  std::vector<const sqlite3_module*> modules_;  // those added
};

class Statement {
 public:
  Statement(sqlite3* db, std::string_view sql);
  Statement(Statement&& other) noexcept : stmt_(std::exchange(other.stmt_, nullptr)) {}
  Statement& operator=(Statement&&) = delete;
  ~Statement();

  // Binding by 1-based position.
  Statement& bind(int index, std::int64_t value);
  Statement& bind(int index, int value) { return bind(index, static_cast<std::int64_t>(value)); }
  Statement& bind(int index, double value);
  Statement& bind(int index, std::string_view value);
  // The text is not copied: it must stay unchanged until the statement is
  // reset (run() resets it). For many rows of texts that outlive the
  // statement's run, where copying each is most of binding it.
  Statement& bind_unowned(int index, std::string_view value);
  Statement& bind(int index, std::optional<double> value);
  Statement& bind_null(int index);
  // A pointer that SQL sees as NULL and only this program's virtual tables
  // and functions read back, by the same `type` (a string literal).
  Statement& bind_pointer(int index, const void* pointer, const char* type);

  // Advances; true while a row is available.
  bool step();
  // Runs a statement that returns no rows, then resets it for reuse.
  void run();
  void reset();

  std::int64_t integer(int column) const { return sqlite3_column_int64(stmt_, column); }
  double real(int column) const { return sqlite3_column_double(stmt_, column); }
  std::string text(int column) const;
  bool is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
  std::optional<double> optional_real(int column) const {
    return is_null(column) ? std::nullopt : std::optional<double>(real(column));
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

// Commits on commit(), rolls back if destroyed before.
class Transaction {
 public:
  explicit Transaction(Database& db) : db_(db) { db_.exec("BEGIN IMMEDIATE"); }
  Transaction(const Transaction&) = delete;
  ~Transaction() {
    if (!done_) try {
        db_.exec("ROLLBACK");
      } catch (...) {
      }
  }
  void commit() {
    db_.exec("COMMIT");
    done_ = true;
  }

 private:
  Database& db_;
  bool done_ = false;
};

}  // namespace tessel::sql
