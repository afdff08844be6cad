// A small, fully specified random generator (xoshiro256**, seeded with
// splitmix64). The standard library's distributions differ between
// implementations; tessel promises bit-identical runs for a seed, so it draws
// everything through this class.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

namespace tessel {

class Rng {
 public:
  explicit Rng(std::uint64_t seed = 0) {
    for (auto& word : state_) {
      seed += 0x9e3779b97f4a7c15ULL;
      std::uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      word = z ^ (z >> 31);
    }
  }

  std::uint64_t next() {
    const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, 1), with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double low, double high) { return low + (high - low) * uniform(); }

  // Uniform integer in [0, n).
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : next() % n; }

  // Exponential with the given rate (mean 1/rate), by inversion.
  double exponential(double rate) { return -std::log1p(-uniform()) / rate; }

  // Index drawn with probability proportional to weights[i].
  std::size_t weighted(std::span<const double> weights) {
    double total = 0;
    for (double w : weights) total += w;
    double x = uniform() * total;
    for (std::size_t i = 0; i < weights.size(); ++i) {
      if (x < weights[i]) return i;
      x -= weights[i];
    }
    return weights.size() - 1;
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t state_[4];
};

// Derives independent seeds from one run seed, e.g. one per plugin.
inline std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t salt) {
  return Rng(seed ^ (salt * 0xd1b54a32d192ed03ULL)).next();
}

}  // namespace tessel
