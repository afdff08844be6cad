// Leaves a file named after the library in $TESSEL_TEST_MARKER_DIR when its
// static constructors run, so that a test can tell whether the loader ran
// any of a library's code.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

struct LoadMarker {
  explicit LoadMarker(const char* library) {
    const char* dir = std::getenv("TESSEL_TEST_MARKER_DIR");
    if (dir == nullptr) return;
    if (std::FILE* file = std::fopen((std::string(dir) + "/" + library).c_str(), "w")) std::fclose(file);
  }
};
