// For job programs, not plugins: reports training progress to the tessel
// agent that launched this process, so that progress-aware policies (LAS,
// SRTF, Optimus) work on real nodes. Header-only; needs nothing but POSIX.
//
//   tessel::report_progress(120, 1000);   // iteration 120 of 1000
//
// The agent sets TESSEL_PROGRESS to a file and reads lines appended to it:
// "iteration N of M" (or "iteration N"). Any program can do the same, e.g.
// `echo "iteration 120 of 1000" >> "$TESSEL_PROGRESS"`, or `tessel progress 120 1000`.
// Outside tessel (TESSEL_PROGRESS unset) reporting does nothing.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace tessel {

// Returns false if the report could not be written.
inline bool report_progress(std::int64_t iteration, std::int64_t total = 0) {
  const char* path = std::getenv("TESSEL_PROGRESS");
  if (path == nullptr || *path == '\0') return true;
  char line[64];
  const int length = total > 0 ? std::snprintf(line, sizeof line, "iteration %lld of %lld\n",
                                               static_cast<long long>(iteration), static_cast<long long>(total))
                               : std::snprintf(line, sizeof line, "iteration %lld\n", static_cast<long long>(iteration));
  // One write() of one short line with O_APPEND: the agent never sees half a line from two writers.
  const int fd = ::open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const bool ok = ::write(fd, line, static_cast<std::size_t>(length)) == length;
  ::close(fd);
  return ok;
}

}  // namespace tessel
