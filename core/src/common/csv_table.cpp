#include "common/csv_table.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>

#include "engine/errors.hpp"

namespace tessel {

namespace {
std::string trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return std::string(s);
}

// What a field should hold, with its range when it has one: "an integer >= 1".
std::string expectation(std::string_view what, double min, double max) {
  auto text = [](double x) {
    std::string s = std::to_string(x);
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
    return s;
  };
  const bool low = min > -1e300, high = max < 1e300;
  std::string out(what);
  if (low && high) return out + " in " + text(min) + ".." + text(max);
  if (low) return out + " >= " + text(min);
  if (high) return out + " <= " + text(max);
  return out;
}

std::string integer_expectation(std::int64_t min, std::int64_t max) {
  return expectation("an integer", min == INT64_MIN ? -1e300 : double(min),
                     max == INT64_MAX ? 1e300 : double(max));
}
}  // namespace

CsvTable::CsvTable(std::string path, const std::vector<std::string>& required_columns,
                   const std::vector<std::string>& optional_columns, CsvFormat format)
    : path_(std::move(path)), in_(path_, std::ios::binary), delimiter_(format.delimiter) {
  if (!in_) throw TraceError(path_, 0, "", std::string("cannot open trace: ") + std::strerror(errno));
  header_ = std::move(format.columns);
  // Otherwise the header is the first non-empty line.
  while (header_.empty() && std::getline(in_, buffer_)) {
    ++line_;
    if (trimmed(buffer_).empty()) continue;
    if (line_ == 1 && buffer_.starts_with("\xEF\xBB\xBF")) buffer_.erase(0, 3);  // UTF-8 BOM
    split(buffer_);
    header_ = fields_;
    break;
  }
  if (header_.empty()) throw TraceError(path_, 0, "", "empty file: expected a header line");
  std::string valid;
  for (const auto& c : required_columns) valid += (valid.empty() ? "" : ", ") + c;
  for (const auto& c : optional_columns) valid += ", " + c;
  for (const auto& column : required_columns)
    if (index_of(column) < 0)
      throw TraceError(path_, line_, "", "header lacks column '" + column + "' (columns: " + valid + ")");
  for (auto column = header_.begin(); column != header_.end(); ++column)
    if (std::find(header_.begin(), column, *column) != column)  // which of the two holds the field?
      throw TraceError(path_, line_, "", "column '" + *column + "' appears twice in the header");
  for (const auto& column : header_)
    if (std::find(required_columns.begin(), required_columns.end(), column) == required_columns.end() &&
        std::find(optional_columns.begin(), optional_columns.end(), column) == optional_columns.end())
      throw TraceError(path_, line_, "", "unknown column '" + column + "' (columns: " + valid + ")");
}

void CsvTable::split(const std::string& line) {
  fields_.clear();
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == delimiter_) {
      fields_.push_back(trimmed(field));
      field.clear();
    } else {
      field += c;
    }
  }
  if (quoted) throw TraceError(path_, line_, "", "unterminated quoted field");
  fields_.push_back(trimmed(field));
}

bool CsvTable::next() {
  while (std::getline(in_, buffer_)) {
    ++line_;
    if (trimmed(buffer_).empty() || buffer_.front() == '#') continue;
    split(buffer_);
    if (fields_.size() != header_.size())
      throw TraceError(path_, line_, "",
                       "expected " + std::to_string(header_.size()) + " fields, got " +
                           std::to_string(fields_.size()));
    return true;
  }
  if (in_.bad()) throw TraceError(path_, line_, "", "read error");
  return false;
}

int CsvTable::index_of(std::string_view column) const {
  for (std::size_t i = 0; i < header_.size(); ++i)
    if (header_[i] == column) return static_cast<int>(i);
  return -1;
}

bool CsvTable::has(std::string_view column) const { return index_of(column) >= 0; }

std::string_view CsvTable::text(std::string_view column) const {
  const int i = index_of(column);
  return i < 0 ? std::string_view() : std::string_view(fields_[i]);
}

void CsvTable::fail(std::string_view column, const std::string& message) const {
  throw TraceError(path_, line_, std::string(column), message);
}

std::string_view CsvTable::required_text(std::string_view column) const {
  const std::string_view field = text(column);
  if (field.empty()) fail(column, "expected a value, got an empty field");
  return field;
}

std::optional<double> CsvTable::optional_number(std::string_view column, double min,
                                                double max) const {
  const std::string_view field = text(column);
  if (field.empty()) return std::nullopt;
  double value = 0;
  auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (error != std::errc() || end != field.data() + field.size() || !std::isfinite(value) ||
      value < min || value > max)
    fail(column, "expected " + expectation("a number", min, max) + ", got '" + std::string(field) + "'");
  return value;
}

std::optional<std::int64_t> CsvTable::optional_integer(std::string_view column, std::int64_t min,
                                                       std::int64_t max) const {
  const std::string_view field = text(column);
  if (field.empty()) return std::nullopt;
  std::int64_t value = 0;
  auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (error != std::errc() || end != field.data() + field.size() || value < min || value > max)
    fail(column, "expected " + integer_expectation(min, max) + ", got '" + std::string(field) + "'");
  return value;
}

double CsvTable::number(std::string_view column, double min, double max) const {
  if (auto value = optional_number(column, min, max)) return *value;
  fail(column, "expected " + expectation("a number", min, max) + ", got an empty field");
}

double CsvTable::positive_number(std::string_view column) const {
  // Checked here whole: -3 is as far from "> 0" as 0 is.
  const std::string_view field = text(column);
  double value = 0;
  const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (field.empty() || error != std::errc() || end != field.data() + field.size() || !std::isfinite(value) ||
      !(value > 0))
    fail(column, "expected a number > 0, got " +
                     (field.empty() ? std::string("an empty field") : "'" + std::string(field) + "'"));
  return value;
}

std::int64_t CsvTable::integer(std::string_view column, std::int64_t min, std::int64_t max) const {
  if (auto value = optional_integer(column, min, max)) return *value;
  fail(column, "expected " + integer_expectation(min, max) + ", got an empty field");
}

}  // namespace tessel
