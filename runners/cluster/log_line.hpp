// The serve and agent logs: one line per fact, stamped with ISO 8601 UTC
// time to the millisecond, so that an operator can line up the daemon's, the
// agents' and the jobs' logs of several hosts.
#pragma once

#include <string>
#include <string_view>

namespace tessel::cluster {

// "2026-11-27T14:59:13.123Z"
std::string iso8601_utc_now();
// The same for a time in Unix seconds; to the second without `millis`.
std::string iso8601_utc(double unix_seconds, bool millis = true);

// Writes "<time> <program>: <text>" to standard error, flushed.
void log_line(std::string_view program, std::string_view text);

}  // namespace tessel::cluster
