// float <-> bf16 / fp16 conversions: exhaustive round trips and the rounding corner cases.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "check/half.h"
#include "mlajit/error.h"

using namespace mlajit;

namespace {

bool bf16_is_nan(uint16_t bits) { return (bits & 0x7F80u) == 0x7F80u && (bits & 0x007Fu); }
bool fp16_is_nan(uint16_t bits) { return (bits & 0x7C00u) == 0x7C00u && (bits & 0x03FFu); }

float from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

}  // namespace

TEST_CASE("every bf16 bit pattern survives a round trip through float") {
  for (uint32_t bits = 0; bits <= 0xFFFFu; ++bits) {
    const auto b = static_cast<uint16_t>(bits);
    const float f = bf16_to_float(b);
    if (bf16_is_nan(b)) {
      REQUIRE(std::isnan(f));
      REQUIRE(bf16_is_nan(float_to_bf16(f)));
    } else {
      REQUIRE(float_to_bf16(f) == b);
    }
  }
}

TEST_CASE("every fp16 bit pattern survives a round trip through float") {
  for (uint32_t bits = 0; bits <= 0xFFFFu; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float f = fp16_to_float(h);
    if (fp16_is_nan(h)) {
      REQUIRE(std::isnan(f));
      REQUIRE(fp16_is_nan(float_to_fp16(f)));
    } else {
      REQUIRE(float_to_fp16(f) == h);
    }
  }
}

TEST_CASE("bf16 conversion rounds to nearest even and keeps specials") {
  CHECK(float_to_bf16(1.0f) == 0x3F80);
  CHECK(float_to_bf16(-2.0f) == 0xC000);
  CHECK(float_to_bf16(0.0f) == 0x0000);
  CHECK(float_to_bf16(-0.0f) == 0x8000);
  CHECK(float_to_bf16(1.0f + 0x1p-8f) == 0x3F80);        // tie -> even (down)
  CHECK(float_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3F82);    // tie -> even (up)
  CHECK(float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3F81);  // above the tie
  CHECK(float_to_bf16(std::numeric_limits<float>::infinity()) == 0x7F80);
  CHECK(float_to_bf16(-std::numeric_limits<float>::infinity()) == 0xFF80);
  CHECK(float_to_bf16(std::numeric_limits<float>::max()) == 0x7F80);  // rounds up to inf
  CHECK(float_to_bf16(from_bits(0x7F7F7FFFu)) == 0x7F7F);             // largest that stays finite
  // A NaN whose payload sits only in the dropped bits must stay NaN, not become infinity.
  CHECK(bf16_is_nan(float_to_bf16(from_bits(0x7F800001u))));
  CHECK(float_to_bf16(from_bits(0xFF800001u)) & 0x8000);
  CHECK(bf16_to_float(0x3F80) == 1.0f);
  CHECK(bf16_to_float(0xC040) == -3.0f);
}

TEST_CASE("fp16 conversion rounds to nearest even including subnormals") {
  CHECK(float_to_fp16(1.0f) == 0x3C00);
  CHECK(float_to_fp16(-2.0f) == 0xC000);
  CHECK(float_to_fp16(-0.0f) == 0x8000);
  CHECK(float_to_fp16(65504.0f) == 0x7BFF);
  CHECK(float_to_fp16(65519.0f) == 0x7BFF);   // below the tie with 65536
  CHECK(float_to_fp16(65520.0f) == 0x7C00);   // tie -> even -> infinity
  CHECK(float_to_fp16(1e10f) == 0x7C00);
  CHECK(float_to_fp16(-1e10f) == 0xFC00);
  CHECK(float_to_fp16(0x1p-14f) == 0x0400);   // smallest normal
  CHECK(float_to_fp16(0x1p-24f) == 0x0001);   // smallest subnormal
  CHECK(float_to_fp16(0x1p-25f) == 0x0000);   // tie between 0 and 2^-24 -> even 0
  CHECK(float_to_fp16(0x1.8p-25f) == 0x0001);
  CHECK(float_to_fp16(0x1.8p-24f) == 0x0002); // tie between 1 and 2 ulps -> even 2
  CHECK(float_to_fp16(0x1p-26f) == 0x0000);
  CHECK(float_to_fp16(0x1.ffcp-15f) == 0x0400);  // rounds up out of the subnormals
  CHECK(float_to_fp16(1.0f + 0x1p-11f) == 0x3C00);      // tie -> even (down)
  CHECK(float_to_fp16(1.0f + 3 * 0x1p-11f) == 0x3C02);  // tie -> even (up)
  CHECK(float_to_fp16(std::numeric_limits<float>::infinity()) == 0x7C00);
  CHECK(fp16_is_nan(float_to_fp16(from_bits(0x7F800001u))));
  CHECK(fp16_to_float(0x0001) == 0x1p-24f);
  CHECK(fp16_to_float(0x8001) == -0x1p-24f);
  CHECK(fp16_to_float(0x7BFF) == 65504.0f);
  CHECK(std::isinf(fp16_to_float(0xFC00)));
  CHECK(fp16_to_float(0x3555) == 0x1.554p-2f);
}

#if defined(__FLT16_MAX__)
TEST_CASE("fp16 conversion agrees with the compiler's _Float16 on random floats") {
  const uint32_t seed = 20260601u;
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t bits = rng();
    const float f = from_bits(bits);
    if (std::isnan(f)) continue;
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t expected;
    std::memcpy(&expected, &h, sizeof expected);
    INFO("float bits 0x" << std::hex << bits);
    REQUIRE(float_to_fp16(f) == expected);
  }
}
#endif

TEST_CASE("dtype dispatch picks the matching conversion") {
  CHECK(float_to_half(DType::kFloat16, 1.0f) == 0x3C00);
  CHECK(float_to_half(DType::kBFloat16, 1.0f) == 0x3F80);
  CHECK(half_to_float(DType::kFloat16, 0x3C00) == 1.0f);
  CHECK(half_to_float(DType::kBFloat16, 0x3F80) == 1.0f);
  CHECK_THROWS_AS(float_to_half(static_cast<DType>(7), 1.0f), Error);
}
