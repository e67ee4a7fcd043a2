#pragma once
// Host conversions between float and the 16-bit types and FP8 e4m3 (round to nearest even),
// for the inputs and outputs of the checks and the benchmark; the library itself never converts
// on the host.
#include <cstdint>

#include "mlajit/kernel_spec.h"

namespace mlajit {

uint16_t float_to_bf16(float value);
float bf16_to_float(uint16_t bits);
uint16_t float_to_fp16(float value);
float fp16_to_float(uint16_t bits);
uint16_t float_to_half(DType dtype, float value);
float half_to_float(DType dtype, uint16_t bits);

// FP8 e4m3 as PyTorch's float8_e4m3fn: bias 7, no infinities, 0x7F/0xFF NaN, largest 448,
// subnormals in steps of 2^-9. Values beyond +-448 (infinities too) saturate to +-448, as a
// quantizer of KV caches wants; a NaN becomes 0x7F. The decoding is exact for all 256 codes.
uint8_t float_to_e4m3(float value);
float e4m3_to_float(uint8_t bits);

}  // namespace mlajit
