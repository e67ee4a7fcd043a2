#pragma once
// Quotients of 32-bit numbers by a divisor known only at run time, by one multiplication: the
// planner divides every tile's KV length by a chunk length, candidate after candidate, and a
// hardware division costs 25-90 cycles where the multiplication costs 3-4.
#include <array>
#include <cstdint>

namespace mlajit::plan {

class Divisor {
 public:
  constexpr Divisor() : Divisor(1) {}
  // Lemire, Kaser and Kurz, "Faster remainder by direct computation" (2019): with
  // magic = floor((2^64 - 1) / d) + 1, floor(n / d) = (magic * n) >> 64 for every 32-bit n and
  // d. For d = 1 the magic would be 2^64; zero stands for it.
  constexpr explicit Divisor(uint32_t divisor)
      : divisor_(divisor), magic_(divisor > 1 ? UINT64_MAX / divisor + 1 : 0) {}

  uint32_t divisor() const { return divisor_; }
  uint32_t quotient(uint32_t numerator) const {
    if (magic_ == 0) return numerator;
    return static_cast<uint32_t>((static_cast<unsigned __int128>(magic_) * numerator) >> 64);
  }
  // ceil(numerator / divisor); numerator + divisor - 1 must fit 32 bits.
  uint32_t ceil_quotient(uint32_t numerator) const { return quotient(numerator + divisor_ - 1); }

 private:
  uint32_t divisor_;
  uint64_t magic_;
};

// Divisors 1..255 made at compile time, for divisors that change from one number to the next
// (a tile's chunk count): making a Divisor divides once, which would gain nothing.
inline constexpr int kSmallDivisors = 256;
inline constexpr std::array<Divisor, kSmallDivisors> small_divisors = [] {
  std::array<Divisor, kSmallDivisors> table{Divisor(1)};
  for (int d = 1; d < kSmallDivisors; ++d) table[d] = Divisor(static_cast<uint32_t>(d));
  return table;
}();

// A Divisor for d >= 1: from the table when small.
inline Divisor divisor_for(uint32_t d) {
  return d < kSmallDivisors ? small_divisors[d] : Divisor(d);
}

}  // namespace mlajit::plan
