#include "log_line.hpp"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <iostream>

namespace tessel::cluster {

std::string iso8601_utc_now() {
  return iso8601_utc(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
}

std::string iso8601_utc(double unix_seconds, bool millis) {
  const auto total_ms = static_cast<std::int64_t>(std::floor(unix_seconds * 1000));
  const auto seconds = static_cast<std::time_t>(total_ms / 1000 - (total_ms % 1000 < 0 ? 1 : 0));
  const auto ms = static_cast<int>(total_ms - static_cast<std::int64_t>(seconds) * 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[40];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d", utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday,
                utc.tm_hour, utc.tm_min, utc.tm_sec);
  std::string result = text;
  if (millis) {
    std::snprintf(text, sizeof text, ".%03d", ms);
    result += text;
  }
  return result + "Z";
}

void log_line(std::string_view program, std::string_view text) {
  // One write per line, so that lines of two threads never interleave.
  std::cerr << (iso8601_utc_now() + " " + std::string(program) + ": " + std::string(text) + "\n") << std::flush;
}

}  // namespace tessel::cluster
