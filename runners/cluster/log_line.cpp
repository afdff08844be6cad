#include "log_line.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>

namespace tessel::cluster {

std::string iso8601_utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[40];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900, utc.tm_mon + 1,
                utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<int>(millis));
  return text;
}

void log_line(std::string_view program, std::string_view text) {
  // One write per line, so that lines of two threads never interleave.
  std::cerr << (iso8601_utc_now() + " " + std::string(program) + ": " + std::string(text) + "\n") << std::flush;
}

}  // namespace tessel::cluster
