// CPython's `random` module (Lib/random.py, Modules/_randommodule.c; the
// algorithms are the same from Python 3.2 to 3.12), for reproducing the
// exact draws of a simulator written in Python: random.seed(n) with an int
// n, then random(), getrandbits(), randint() and uniform(). Only what a
// generator here needs; tessel's own draws go through tessel::Rng.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace tessel {

class PythonRandom {
 public:
  // random.seed(seed): init_by_array over the 32-bit words of |seed|, least
  // significant first ([0] for 0). Python hashes nothing for an int seed.
  explicit PythonRandom(std::int64_t seed) {
    std::uint64_t n = seed < 0 ? 0 - static_cast<std::uint64_t>(seed) : static_cast<std::uint64_t>(seed);
    std::vector<std::uint32_t> key;
    do {
      key.push_back(static_cast<std::uint32_t>(n));
      n >>= 32;
    } while (n != 0);
    init_by_array(key);
  }

  // One 32-bit output of MT19937 (genrand_uint32).
  std::uint32_t next32() {
    if (index_ >= kN) twist();
    std::uint32_t y = state_[index_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    y ^= y >> 18;
    return y;
  }

  // random.random(): 53 bits from two outputs, (a >> 5) * 2^26 + (b >> 6).
  double random() {
    const std::uint32_t a = next32() >> 5, b = next32() >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
  }

  // random.uniform(a, b): a + (b - a) * random(), as Python computes it.
  double uniform(double a, double b) { return a + (b - a) * random(); }

  // random.getrandbits(k) for 0 < k <= 32: the top k bits of one output.
  std::uint32_t getrandbits(int k) {
    if (k <= 0 || k > 32) throw std::invalid_argument("PythonRandom::getrandbits: k must be in 1..32");
    return next32() >> (32 - k);
  }

  // random.randint(a, b), both ends included: a + _randbelow(b - a + 1),
  // where _randbelow(n) draws getrandbits(n.bit_length()) until below n.
  std::int64_t randint(std::int64_t a, std::int64_t b) {
    // The width unsigned: b - a overflows std::int64_t for far-apart bounds
    // of opposite signs, and its wrapped value would pass the check below.
    const std::uint64_t width = static_cast<std::uint64_t>(b) - static_cast<std::uint64_t>(a);
    if (b < a || width >= (std::uint64_t{1} << 32) - 1)
      throw std::invalid_argument("PythonRandom::randint: needs a <= b and b - a < 2^32 - 1");
    const auto n = static_cast<std::uint32_t>(width + 1);
    int bits = 0;
    while (bits < 32 && (n >> bits) != 0) ++bits;
    std::uint32_t r = getrandbits(bits);
    while (r >= n) r = getrandbits(bits);
    return a + r;  // at most b
  }

 private:
  static constexpr int kN = 624, kM = 397;

  void init_genrand(std::uint32_t s) {
    state_[0] = s;
    for (int i = 1; i < kN; ++i)
      state_[i] = 1812433253U * (state_[i - 1] ^ (state_[i - 1] >> 30)) + static_cast<std::uint32_t>(i);
    index_ = kN;
  }

  void init_by_array(const std::vector<std::uint32_t>& key) {
    init_genrand(19650218U);
    const int length = static_cast<int>(key.size());
    int i = 1, j = 0;
    for (int k = kN > length ? kN : length; k > 0; --k) {
      state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1664525U)) + key[j] +
                  static_cast<std::uint32_t>(j);
      ++i;
      ++j;
      if (i >= kN) {
        state_[0] = state_[kN - 1];
        i = 1;
      }
      if (j >= length) j = 0;
    }
    for (int k = kN - 1; k > 0; --k) {
      state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1566083941U)) - static_cast<std::uint32_t>(i);
      ++i;
      if (i >= kN) {
        state_[0] = state_[kN - 1];
        i = 1;
      }
    }
    state_[0] = 0x80000000U;  // the most significant bit is 1: a nonzero initial array
  }

  void twist() {
    for (int i = 0; i < kN; ++i) {
      const std::uint32_t y = (state_[i] & 0x80000000U) | (state_[(i + 1) % kN] & 0x7fffffffU);
      state_[i] = state_[(i + kM) % kN] ^ (y >> 1) ^ ((y & 1U) ? 0x9908b0dfU : 0U);
    }
    index_ = 0;
  }

  std::array<std::uint32_t, kN> state_{};
  int index_ = kN;
};

}  // namespace tessel
