#pragma once
// Host conversions between float and the 16-bit types (round to nearest even), for the inputs
// and outputs of the checks and the benchmark; the library itself never converts on the host.
#include <cstdint>

#include "mlajit/kernel_spec.h"

namespace mlajit {

uint16_t float_to_bf16(float value);
float bf16_to_float(uint16_t bits);
uint16_t float_to_fp16(float value);
float fp16_to_float(uint16_t bits);
uint16_t float_to_half(DType dtype, float value);
float half_to_float(DType dtype, uint16_t bits);

}  // namespace mlajit
