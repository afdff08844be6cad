// The `tessel` subcommands, each a few calls into libtessel. main.cpp parses
// the command line and maps exceptions to exit codes; nothing here parses.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessel::cli {

struct RunOptions {
  std::string config;
  std::string database;  // empty: [output] database
  std::vector<std::string> overrides;
  unsigned parallel = 0;  // 0: one simulation per core
  bool resume = false;
  bool quiet = false;
};

struct ReportOptions {
  std::string database;
  std::string format = "table";
  std::vector<std::int64_t> runs;
};

struct PluginsOptions {
  std::string kind;  // empty: all
  std::vector<std::string> directories;
  bool verbose = false;
};

int run(const RunOptions& options, const std::atomic<bool>& stop);
int validate(const std::string& config, const std::vector<std::string>& overrides);
int plugins(const PluginsOptions& options);
int report(const ReportOptions& options);

}  // namespace tessel::cli
