// float <-> FP8 e4m3 (float8_e4m3fn) conversions of the check library: all 256 codes, known
// values, round to nearest even (ties included), saturation and NaN.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>

#include "check/half.h"

using namespace mlajit;

namespace {

bool e4m3_is_nan(uint8_t bits) { return (bits & 0x7Fu) == 0x7Fu; }

}  // namespace

TEST_CASE("every e4m3 code decodes to a distinct value and encodes back to itself", "[e4m3]") {
  std::set<float> positives;
  for (int code = 0; code < 256; ++code) {
    const auto bits = static_cast<uint8_t>(code);
    const float value = e4m3_to_float(bits);
    INFO("code 0x" << std::hex << code << " decodes to " << value);
    if (e4m3_is_nan(bits)) {
      CHECK(std::isnan(value));
      CHECK(float_to_e4m3(value) == 0x7F);
      continue;
    }
    REQUIRE(std::isfinite(value));
    CHECK(std::signbit(value) == (code >= 0x80));
    CHECK(float_to_e4m3(value) == bits);  // -0.0 included: 0x80 keeps its sign
    if (code < 0x80) positives.insert(value);
  }
  CHECK(positives.size() == 127);  // 0x00..0x7E: no two codes share a value
  CHECK(*positives.rbegin() == 448.0f);
}

TEST_CASE("e4m3 known values", "[e4m3]") {
  CHECK(e4m3_to_float(0x00) == 0.0f);
  CHECK(e4m3_to_float(0x38) == 1.0f);
  CHECK(e4m3_to_float(0x7E) == 448.0f);
  CHECK(e4m3_to_float(0x01) == std::ldexp(1.0f, -9));   // smallest subnormal
  CHECK(e4m3_to_float(0x07) == std::ldexp(7.0f, -9));   // largest subnormal
  CHECK(e4m3_to_float(0x08) == std::ldexp(1.0f, -6));   // smallest normal
  CHECK(e4m3_to_float(0x3C) == 1.5f);
  CHECK(e4m3_to_float(0x40) == 2.0f);
  CHECK(e4m3_to_float(0x77) == 240.0f);
  CHECK(e4m3_to_float(0xB8) == -1.0f);
  CHECK(e4m3_to_float(0xFE) == -448.0f);
  CHECK(e4m3_to_float(0x81) == -std::ldexp(1.0f, -9));
  CHECK(e4m3_to_float(0xC4) == -3.0f);

  CHECK(float_to_e4m3(1.0f) == 0x38);
  CHECK(float_to_e4m3(-2.0f) == 0xC0);
  CHECK(float_to_e4m3(0.0f) == 0x00);
  CHECK(float_to_e4m3(-0.0f) == 0x80);
  CHECK(float_to_e4m3(448.0f) == 0x7E);
  CHECK(float_to_e4m3(-448.0f) == 0xFE);
  CHECK(float_to_e4m3(std::ldexp(1.0f, -9)) == 0x01);
  CHECK(float_to_e4m3(std::ldexp(1.0f, -6)) == 0x08);
  CHECK(float_to_e4m3(0.1f) == 0x1D);  // 0.1 = 1.6 x 2^-4 -> 1.625 x 2^-4 = 0.1015625
}

TEST_CASE("e4m3 rounds to nearest even, ties included, in normals and subnormals", "[e4m3]") {
  // Normals near 1 are 1/8 apart: 1 + 1/16 is the tie between 0x38 (even) and 0x39.
  CHECK(float_to_e4m3(1.0f + 0x1p-4f) == 0x38);
  CHECK(float_to_e4m3(1.0f + 3 * 0x1p-4f) == 0x3A);  // tie between 0x39 and 0x3A (even)
  CHECK(float_to_e4m3(1.0f + 0x1p-4f + 0x1p-12f) == 0x39);  // just above the tie
  CHECK(float_to_e4m3(1.0f + 0x1p-4f - 0x1p-12f) == 0x38);  // just below it
  CHECK(float_to_e4m3(-(1.0f + 3 * 0x1p-4f)) == 0xBA);
  // The tie at the top of a binade carries into the exponent: 1.9375 -> 2.
  CHECK(float_to_e4m3(1.9375f) == 0x40);
  // Subnormals are 2^-9 apart: 2^-10 ties to 0, 3 x 2^-10 ties to 2 x 2^-9.
  CHECK(float_to_e4m3(0x1p-10f) == 0x00);
  CHECK(float_to_e4m3(-0x1p-10f) == 0x80);
  CHECK(float_to_e4m3(0x1p-10f + 0x1p-20f) == 0x01);
  CHECK(float_to_e4m3(3 * 0x1p-10f) == 0x02);
  CHECK(float_to_e4m3(5 * 0x1p-10f) == 0x02);
  // Largest subnormal 7 x 2^-9 up to the smallest normal 2^-6: the tie goes to 0x08 (even).
  CHECK(float_to_e4m3(15 * 0x1p-10f) == 0x08);
  CHECK(float_to_e4m3(0x1p-12f) == 0x00);
  CHECK(float_to_e4m3(std::numeric_limits<float>::denorm_min()) == 0x00);
}

TEST_CASE("e4m3 saturates at +-448 and turns NaN into 0x7F", "[e4m3]") {
  CHECK(float_to_e4m3(449.0f) == 0x7E);
  CHECK(float_to_e4m3(464.0f) == 0x7E);  // the tie with the (missing) 480
  CHECK(float_to_e4m3(470.0f) == 0x7E);  // would round to 480, which is the NaN code
  CHECK(float_to_e4m3(1e30f) == 0x7E);
  CHECK(float_to_e4m3(-1e30f) == 0xFE);
  CHECK(float_to_e4m3(std::numeric_limits<float>::infinity()) == 0x7E);
  CHECK(float_to_e4m3(-std::numeric_limits<float>::infinity()) == 0xFE);
  CHECK(float_to_e4m3(std::numeric_limits<float>::quiet_NaN()) == 0x7F);
  CHECK(float_to_e4m3(-std::numeric_limits<float>::quiet_NaN()) == 0x7F);
  CHECK(std::isnan(e4m3_to_float(0x7F)));
  CHECK(std::isnan(e4m3_to_float(0xFF)));
}

TEST_CASE("e4m3 encoding is the nearest code for values between the codes", "[e4m3]") {
  // Brute force against the decoded table: for points between neighbouring codes, the encoder
  // must pick the nearer one (ties are covered above).
  for (int code = 0; code < 0x7E; ++code) {
    const float low = e4m3_to_float(static_cast<uint8_t>(code));
    const float high = e4m3_to_float(static_cast<uint8_t>(code + 1));
    const float step = high - low;
    INFO("between 0x" << std::hex << code << " and 0x" << code + 1);
    CHECK(float_to_e4m3(low + 0.25f * step) == code);
    CHECK(float_to_e4m3(low + 0.75f * step) == code + 1);
    CHECK(float_to_e4m3(-(low + 0.75f * step)) == (0x80 | (code + 1)));
  }
}
