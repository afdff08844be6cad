// The third review of the day's merges: each case fails without its fix.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <stdexcept>

#include "common/python_random.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

// /usr/bin/python3 (3.11.2) -c "import random
// r=random.Random(42); print([r.randint(-2**63, -2**63+5) + 2**63 for _ in range(6)])
// r=random.Random(42); print([r.randint(2**63-4, 2**63-1) - (2**63-4) for _ in range(6)])"
// gives [5, 0, 0, 5, 2, 1] and [0, 0, 2, 1, 1, 1].
TEST_CASE("PythonRandom::randint at the ends of int64, and bounds too far apart refused rather than wrapped") {
  constexpr std::int64_t lowest = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t highest = std::numeric_limits<std::int64_t>::max();
  {
    PythonRandom r(42);
    for (std::int64_t expected : {5, 0, 0, 5, 2, 1}) CHECK(r.randint(lowest, lowest + 5) == lowest + expected);
  }
  {
    PythonRandom r(42);
    for (std::int64_t expected : {0, 0, 2, 1, 1, 1}) CHECK(r.randint(highest - 3, highest) == highest - 3 + expected);
  }
  PythonRandom r(42);
  // b - a is 2^63 + 9: in int64 it wrapped to a negative width, which passed
  // the width check, and randint drew from [a, a + 9] as if b were a + 9.
  CHECK_THROWS_AS(r.randint(-(std::int64_t{1} << 62), (std::int64_t{1} << 62) + 9), std::invalid_argument);
  CHECK_THROWS_AS(r.randint(lowest, highest), std::invalid_argument);
  CHECK_THROWS_AS(r.randint(0, std::int64_t{1} << 32), std::invalid_argument);
  CHECK_NOTHROW(r.randint(0, (std::int64_t{1} << 32) - 2));
}
