#pragma once
#include <cstring>
namespace mlajit_kernel {
struct bf16_t { unsigned short bits; };
struct f16_t { unsigned short bits; };
template <typename T> struct Dtype16;
inline uint32_t f2bf(float f) { uint32_t u; std::memcpy(&u, &f, 4); uint32_t r = ((u >> 16) & 1) + 0x7fff; return (u + r) >> 16; }
template <> struct Dtype16<bf16_t> {
  static uint32_t pack(float lo, float hi) { return f2bf(lo) | (f2bf(hi) << 16); }
  static float to_float(uint32_t b) { uint32_t u = b << 16; float f; std::memcpy(&f, &u, 4); return f; }
};
template <> struct Dtype16<f16_t> {
  static uint32_t pack(float lo, float hi) { _Float16 a = (_Float16)lo, b = (_Float16)hi; uint16_t x, y; std::memcpy(&x,&a,2); std::memcpy(&y,&b,2); return x | (uint32_t(y) << 16); }
  static float to_float(uint32_t b) { uint16_t x = (uint16_t)b; _Float16 h; std::memcpy(&h, &x, 2); return (float)h; }
};
template <typename T> inline void unpack2(uint32_t p, float& lo, float& hi) { lo = Dtype16<T>::to_float(p & 0xffffu); hi = Dtype16<T>::to_float(p >> 16); }
}
