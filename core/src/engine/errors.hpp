// Error types of the engine. Anything derived from UserError is the user's to
// fix (a bad config, trace, plugin or database) and maps to exit code 2;
// every other exception is a tessel bug and maps to exit code 1.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessel {

class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One problem in a user's input, located like a compiler diagnostic:
// `where` is "file:line:col", "file:line", "--set key=value" or "file: [sweep] key=value".
struct Diagnostic {
  std::string where;
  std::string message;

  std::string str() const { return where.empty() ? message : where + ": " + message; }
};

// Collects every problem found in one pass so the user sees them all at once.
class Diagnostics {
 public:
  void error(std::string where, std::string message) {
    items_.push_back({std::move(where), std::move(message)});
  }
  bool empty() const { return items_.empty(); }
  const std::vector<Diagnostic>& items() const { return items_; }
  // Throws ConfigError if anything was reported.
  void raise_if_any() const;

 private:
  std::vector<Diagnostic> items_;
};

class ConfigError : public UserError {
 public:
  explicit ConfigError(std::vector<Diagnostic> diagnostics);
  ConfigError(std::string where, std::string message)
      : ConfigError(std::vector<Diagnostic>{{std::move(where), std::move(message)}}) {}
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

 private:
  std::vector<Diagnostic> diagnostics_;
};

inline std::string join_diagnostics(const std::vector<Diagnostic>& diagnostics) {
  std::string text;
  for (const Diagnostic& d : diagnostics) {
    if (!text.empty()) text += '\n';
    text += d.str();
  }
  return text;
}

inline ConfigError::ConfigError(std::vector<Diagnostic> diagnostics)
    : UserError(join_diagnostics(diagnostics)), diagnostics_(std::move(diagnostics)) {}

inline void Diagnostics::raise_if_any() const {
  if (!items_.empty()) throw ConfigError(items_);
}

// A malformed input file (a trace, a cluster spec, a model's data): names
// the file, the line and the field.
class TraceError : public UserError {
 public:
  TraceError(const std::string& file, std::size_t line, const std::string& field,
             const std::string& message)
      : UserError(file + (line ? ":" + std::to_string(line) : std::string()) +
                  (field.empty() ? std::string() : ": field '" + field + "'") + ": " + message) {}
};

// A plugin failed during a run: it broke its stage's contract with the core,
// or threw. The plugin's bug (exit code 1). The message names the plugin,
// its stage and the time.
class PluginContractError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// The user stopped the work (Ctrl-C), or code a plugin hosts stopped itself
// (a Python policy raised KeyboardInterrupt). What it says is the whole
// story for the user: what was stopped (its cause), then how many runs the
// stop marked 'interrupted', if any.
class Interrupted : public std::runtime_error {
 public:
  static constexpr const char* kStopped = "interrupted";  // the cause when nothing more is known

  explicit Interrupted(std::string cause = kStopped, std::size_t runs_marked = 0)
      : std::runtime_error(told(cause, runs_marked)), cause_(std::move(cause)), runs_marked_(runs_marked) {}
  const std::string& cause() const { return cause_; }
  bool says_what_stopped() const { return cause_ != kStopped; }
  std::size_t runs_marked() const { return runs_marked_; }
  // The same stop, once it has marked `runs` runs in all.
  Interrupted marking(std::size_t runs) const { return Interrupted(cause_, runs); }

 private:
  static std::string told(const std::string& cause, std::size_t runs) {
    if (runs == 0) return cause;
    return cause + (runs == 1 ? std::string("; the run is marked 'interrupted'")
                              : "; " + std::to_string(runs) + " runs are marked 'interrupted'");
  }
  std::string cause_;
  std::size_t runs_marked_;
};

// The same failure of a plugin that hosts the user's own code (a Python
// policy): the user's to fix. The message also says where that code is.
class HostedCodeFailure : public UserError {
 public:
  using UserError::UserError;
};

}  // namespace tessel
