// A CSV file read row by row with a header, for whatever reads one: trace
// readers, cluster specs, models' measurements. Fields are
// looked up by column name and parsed with errors that name the file, line
// and column ("trace.csv:7: field 'gpus': expected an integer >= 1, got 'x'").
// Handles quoted fields ("a, b") and CRLF line ends.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessel {

struct CsvFormat {
  char delimiter = ',';
  // Column names for a file without a header line; empty when the first
  // non-empty line is the header.
  std::vector<std::string> columns;
};

class CsvTable {
 public:
  // Opens `path` and reads its header. Throws TraceError if the file cannot
  // be read, a required column is missing or a column is unknown.
  CsvTable(std::string path, const std::vector<std::string>& required_columns,
           const std::vector<std::string>& optional_columns, CsvFormat format = {});

  // Advances to the next non-empty row; false at the end of the file.
  bool next();

  std::size_t line() const { return line_; }
  const std::string& path() const { return path_; }
  bool has(std::string_view column) const;

  // Field accessors for the current row. The optional forms return nullopt
  // when the column is absent or the field is empty.
  std::string_view text(std::string_view column) const;
  // The field, which must not be empty.
  std::string_view required_text(std::string_view column) const;
  double number(std::string_view column, double min = -1e300, double max = 1e300) const;
  std::int64_t integer(std::string_view column, std::int64_t min = INT64_MIN,
                       std::int64_t max = INT64_MAX) const;
  // A number > 0: a duration or a weight, where 0 means nothing.
  double positive_number(std::string_view column) const;
  std::optional<double> optional_number(std::string_view column, double min = -1e300,
                                        double max = 1e300) const;
  std::optional<std::int64_t> optional_integer(std::string_view column, std::int64_t min = INT64_MIN,
                                               std::int64_t max = INT64_MAX) const;

  [[noreturn]] void fail(std::string_view column, const std::string& message) const;

 private:
  int index_of(std::string_view column) const;
  void split(const std::string& line);

  std::string path_;
  std::ifstream in_;
  char delimiter_;
  std::size_t line_ = 0;
  std::vector<std::string> header_;
  std::vector<std::string> fields_;
  std::string buffer_;
};

}  // namespace tessel
