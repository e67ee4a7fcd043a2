#pragma once
#include <cmath>
#include <limits>
namespace mlajit_kernel {
inline float neg_inf() { return -std::numeric_limits<float>::infinity(); }
constexpr float kLn2 = 0.6931471805599453f;
inline float fast_exp2(float x) { return std::exp2(x); }
inline float fast_log2(float x) { return std::log2(x); }
}
