// Out-of-line parts of the public data model (job.hpp, plugin.hpp, reason.hpp, view.hpp).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tessel/job.hpp"
#include "tessel/plugin.hpp"
#include "tessel/reason.hpp"

namespace tessel {

std::string_view to_string(JobStatus status) {
  switch (status) {
    case JobStatus::pending: return "pending";
    case JobStatus::queued: return "queued";
    case JobStatus::running: return "running";
    case JobStatus::preempted: return "preempted";
    case JobStatus::finished: return "finished";
    case JobStatus::failed: return "failed";
    case JobStatus::rejected: return "rejected";
  }
  return "?";
}

std::string_view to_string(PluginKind kind) {
  switch (kind) {
    case PluginKind::admission: return "admission";
    case PluginKind::allocation: return "allocation";
    case PluginKind::placement: return "placement";
    case PluginKind::elasticity: return "elasticity";
  }
  return "?";
}

std::string_view to_string(ArgType type) {
  switch (type) {
    case ArgType::boolean: return "boolean";
    case ArgType::integer: return "integer";
    case ArgType::number: return "number";
    case ArgType::string: return "string";
    case ArgType::number_list: return "list of numbers";
    case ArgType::string_list: return "list of strings";
    case ArgType::number_table: return "table of numbers";
  }
  return "?";
}

namespace {
// Whole numbers exactly; others to about four significant digits, never in
// exponent form for ordinary magnitudes ("38728", "12.35", "0.125").
void append_number(std::string& out, double value) {
  char buffer[32];
  const double magnitude = std::fabs(value);
  if (!std::isfinite(value) || magnitude >= 1e15 || (magnitude < 1e-3 && value != 0))
    std::snprintf(buffer, sizeof buffer, "%g", value);
  else if (value == std::round(value) || magnitude >= 1000)
    std::snprintf(buffer, sizeof buffer, "%.0f", value);
  else
    std::snprintf(buffer, sizeof buffer, "%.4g", value);
  out += buffer;
}
}  // namespace

// The text of a formatted reason; with `measurements` false, `{~}`
// placeholders stay as they are.
std::string Reason::render(bool measurements) const {
  std::string out;
  if (format_ == nullptr) {
    if (text_) out = *text_;
  } else {
    unsigned next = 0;
    for (const char* p = format_; *p != '\0'; ++p) {
      if (p[0] == '{' && p[1] == '}' && next < arg_count_) {
        append_number(out, args_[next++]);
        ++p;
      } else if (p[0] == '{' && p[1] == '~' && p[2] == '}' && next < arg_count_) {
        if (measurements) append_number(out, args_[next]);
        else out += "{~}";
        ++next;
        p += 2;
      } else {
        out += *p;
      }
    }
  }
  if (!who_) return out;
  return out.empty() ? *who_ : *who_ + ": " + out;
}

std::string Reason::str() const { return render(true); }

std::string Reason::kind() const { return render(false); }

}  // namespace tessel
