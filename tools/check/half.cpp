#include "check/half.h"

#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "mlajit/error.h"

namespace mlajit {
namespace {

uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float bits_float(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// Drops the low `shift` bits of `value`, rounding to nearest with ties to even. A carry out
// of the mantissa lands in the exponent field, which is exactly the right rounding up to the
// next binade (or to infinity).
uint32_t round_shift_right_even(uint32_t value, int shift) {
  const uint32_t kept = value >> shift;
  const uint32_t rest = value & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
}

constexpr uint32_t kFloatExpMask = 0x7F800000u;
constexpr uint32_t kFloatMantMask = 0x007FFFFFu;

bool is_nan_bits(uint32_t bits) {
  return (bits & kFloatExpMask) == kFloatExpMask && (bits & kFloatMantMask) != 0;
}

}  // namespace

uint16_t float_to_bf16(float value) {
  const uint32_t bits = float_bits(value);
  // NaN: keep the sign and top payload bits, force the quiet bit so a payload that lives only
  // in the dropped low bits cannot turn into infinity.
  if (is_nan_bits(bits)) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  return static_cast<uint16_t>(round_shift_right_even(bits, 16));
}

float bf16_to_float(uint16_t bits) { return bits_float(static_cast<uint32_t>(bits) << 16); }

uint16_t float_to_fp16(float value) {
  const uint32_t bits = float_bits(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const int exp = static_cast<int>((bits >> 23) & 0xFFu);
  const uint32_t mant = bits & kFloatMantMask;
  if (exp == 0xFF) {  // infinity or NaN (quiet, top payload bits kept)
    return static_cast<uint16_t>(sign | 0x7C00u | (mant ? 0x0200u | (mant >> 13) : 0u));
  }
  const int half_exp = exp - 127 + 15;
  if (half_exp >= 31) return static_cast<uint16_t>(sign | 0x7C00u);  // overflow
  if (half_exp <= 0) {
    // fp16 subnormal (or zero): value = m * 2^-24. Below 2^-25 everything rounds to zero;
    // 2^-25 itself is the tie between 0 and 2^-24 and goes to the even 0.
    if (half_exp < -10) return static_cast<uint16_t>(sign);
    const uint32_t full_mant = mant | 0x00800000u;  // float zero/denormals fall in the branch above
    return static_cast<uint16_t>(sign | round_shift_right_even(full_mant, 14 - half_exp));
  }
  const uint32_t unrounded = (static_cast<uint32_t>(half_exp) << 23) | mant;
  return static_cast<uint16_t>(sign | round_shift_right_even(unrounded, 13));
}

float fp16_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1Fu;
  const uint32_t mant = bits & 0x03FFu;
  if (exp == 0) {  // zero or subnormal: exact in float
    const float magnitude = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exp == 0x1F) return bits_float(sign | kFloatExpMask | (mant << 13));
  return bits_float(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

uint8_t float_to_e4m3(float value) {
  const uint32_t bits = float_bits(value);
  if (is_nan_bits(bits)) return 0x7Fu;
  const uint32_t sign = (bits >> 24) & 0x80u;
  if (std::fabs(value) > 448.0f) return static_cast<uint8_t>(sign | 0x7Eu);  // saturate
  const int exp = static_cast<int>((bits >> 23) & 0xFFu) - 127;  // unbiased
  const uint32_t mant = bits & kFloatMantMask;
  if (exp < -6) {
    // e4m3 subnormal (or zero): value = m * 2^-9. Below 2^-10 everything rounds to zero;
    // 2^-10 itself is the tie between 0 and 2^-9 and goes to the even 0. A carry to m = 8
    // is the smallest normal, 0x08, which the bit pattern gets right by itself.
    if (exp < -10) return static_cast<uint8_t>(sign);
    return static_cast<uint8_t>(sign | round_shift_right_even(mant | 0x00800000u, 14 - exp));
  }
  // Rounding up from 448's binade cannot reach the NaN code: anything above 448 was saturated.
  const uint32_t unrounded = (static_cast<uint32_t>(exp + 7) << 23) | mant;
  return static_cast<uint8_t>(sign | round_shift_right_even(unrounded, 20));
}

float e4m3_to_float(uint8_t bits) {
  const bool negative = bits & 0x80u;
  const int exp = (bits >> 3) & 0x0F;
  const int mant = bits & 0x07;
  if (exp == 0x0F && mant == 0x07) return std::numeric_limits<float>::quiet_NaN();
  // Both forms are exact in float: at most 4 significant bits, exponents -9..8.
  const float magnitude = exp == 0 ? std::ldexp(static_cast<float>(mant), -9)
                                   : std::ldexp(static_cast<float>(8 + mant), exp - 10);
  return negative ? -magnitude : magnitude;
}

uint16_t float_to_half(DType dtype, float value) {
  switch (dtype) {
    case DType::kFloat16: return float_to_fp16(value);
    case DType::kBFloat16: return float_to_bf16(value);
    case DType::kFloat8E4M3: break;  // one byte: not a 16-bit type
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("float_to_half: dtype {} is not a 16-bit type (expected f16 or bf16)",
                          static_cast<int>(dtype)));
}

float half_to_float(DType dtype, uint16_t bits) {
  switch (dtype) {
    case DType::kFloat16: return fp16_to_float(bits);
    case DType::kBFloat16: return bf16_to_float(bits);
    case DType::kFloat8E4M3: break;  // one byte: not a 16-bit type
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("half_to_float: dtype {} is not a 16-bit type (expected f16 or bf16)",
                          static_cast<int>(dtype)));
}

}  // namespace mlajit
