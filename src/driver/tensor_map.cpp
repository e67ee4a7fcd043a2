// TMA tensor maps: the rules of cuTensorMapEncodeTiled checked up front, then the call.
#include "driver/tensor_map.h"

#include <string>

#include <fmt/format.h>

#include "driver/cuda_driver.h"
#include "driver/driver_api.h"
#include "mlajit/error.h"

namespace mlajit::driver {
namespace {

constexpr size_t kMaxRank = 5;
constexpr uint64_t kMaxGlobalDim = uint64_t{1} << 32;
constexpr uint64_t kStrideLimit = uint64_t{1} << 40;
constexpr uint32_t kMaxBoxDim = 256;
constexpr uint32_t kMaxElementStride = 8;

[[noreturn]] void refuse(const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, "tensor map (cuTensorMapEncodeTiled): " + what);
}

const char* swizzle_name(CUtensorMapSwizzle swizzle) {
  switch (swizzle) {
    case CU_TENSOR_MAP_SWIZZLE_NONE: return "NONE";
    case CU_TENSOR_MAP_SWIZZLE_32B: return "32B";
    case CU_TENSOR_MAP_SWIZZLE_64B: return "64B";
    case CU_TENSOR_MAP_SWIZZLE_128B: return "128B";
    default: return "unsupported";
  }
}

// The bytes one swizzle pattern spans along the box's inner dimension; 0 for NONE.
uint64_t swizzle_span(CUtensorMapSwizzle swizzle) {
  switch (swizzle) {
    case CU_TENSOR_MAP_SWIZZLE_32B: return 32;
    case CU_TENSOR_MAP_SWIZZLE_64B: return 64;
    case CU_TENSOR_MAP_SWIZZLE_128B: return 128;
    default: return 0;
  }
}

bool is_floating(CUtensorMapDataType dtype) {
  switch (dtype) {
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ:
      return true;
    default:
      return false;
  }
}

size_t rank_of(const TiledTensorMap& m) { return m.global_dims.size(); }

// stride x extent can pass 2^64 for valid fields (2^40 x 2^32); any such extent is larger than
// every valid stride, which the saturated value still says.
uint64_t saturating_product(uint64_t a, uint64_t b) {
  if (a != 0 && b > UINT64_MAX / a) return UINT64_MAX;
  return a * b;
}

void check_rank_and_counts(const TiledTensorMap& m) {
  const size_t rank = rank_of(m);
  if (rank < 1 || rank > kMaxRank) {
    refuse(fmt::format("rank {} (global_dims has {} entries); a tiled tensor map has rank 1..{}",
                       rank, rank, kMaxRank));
  }
  if (m.global_strides.size() != rank - 1) {
    refuse(fmt::format("global_strides has {} entries for rank {}; it needs rank - 1 = {} (the "
                       "byte strides of dims 1..{}, dims[0] being contiguous)",
                       m.global_strides.size(), rank, rank - 1, rank - 1));
  }
  if (m.box_dims.size() != rank) {
    refuse(fmt::format("box_dims has {} entries for rank {}; it needs {}", m.box_dims.size(),
                       rank, rank));
  }
  if (!m.element_strides.empty() && m.element_strides.size() != rank) {
    refuse(fmt::format("element_strides has {} entries for rank {}; it needs {}, or none for "
                       "all 1",
                       m.element_strides.size(), rank, rank));
  }
}

void check_modes(const TiledTensorMap& m) {
  if (static_cast<int>(m.interleave) < 0 ||
      static_cast<int>(m.interleave) > CU_TENSOR_MAP_INTERLEAVE_32B) {
    refuse(fmt::format("interleave {} is not a CUtensorMapInterleave value (0..2)",
                       static_cast<int>(m.interleave)));
  }
  if (m.interleave != CU_TENSOR_MAP_INTERLEAVE_NONE && rank_of(m) < 3) {
    refuse(fmt::format("interleave {} needs rank 3 or more; rank is {}",
                       static_cast<int>(m.interleave), rank_of(m)));
  }
  // The 128B_ATOM_* modes exist for later architectures; nothing here uses them, and their
  // span rules differ, so they are refused rather than checked half-way.
  if (swizzle_span(m.swizzle) == 0 && m.swizzle != CU_TENSOR_MAP_SWIZZLE_NONE) {
    refuse(fmt::format("swizzle {} is not supported here; use CU_TENSOR_MAP_SWIZZLE_NONE, 32B, "
                       "64B or 128B",
                       static_cast<int>(m.swizzle)));
  }
  if (m.interleave == CU_TENSOR_MAP_INTERLEAVE_32B && m.swizzle != CU_TENSOR_MAP_SWIZZLE_32B) {
    refuse(fmt::format("interleave 32B needs swizzle 32B; swizzle is {}",
                       swizzle_name(m.swizzle)));
  }
  if (m.oob_fill == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA && !is_floating(m.dtype)) {
    refuse(fmt::format("oob_fill NAN_REQUEST_ZERO_FMA needs a floating-point dtype; dtype is {} "
                       "(use CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE, which fills zeros)",
                       static_cast<int>(m.dtype)));
  } else if (m.oob_fill != CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE &&
             m.oob_fill != CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA) {
    refuse(fmt::format("oob_fill {} is not a CUtensorMapFloatOOBfill value (0..1)",
                       static_cast<int>(m.oob_fill)));
  }
}

void check_address(const TiledTensorMap& m) {
  const uint64_t alignment = m.interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16;
  if (m.global_address == 0) refuse("global_address is null");
  if (m.global_address % alignment != 0) {
    refuse(fmt::format("global_address {:#x} is not {}-byte aligned (it is {} bytes past a "
                       "multiple of {}){}",
                       static_cast<uint64_t>(m.global_address), alignment,
                       m.global_address % alignment, alignment,
                       alignment == 32 ? "; interleave 32B needs 32-byte alignment" : ""));
  }
}

void check_global_extent(const TiledTensorMap& m, size_t element_bytes) {
  const size_t rank = rank_of(m);
  for (size_t i = 0; i < rank; ++i) {
    const uint64_t dim = m.global_dims[i];
    if (dim < 1 || dim > kMaxGlobalDim) {
      refuse(fmt::format("global_dims[{}] = {} is outside 1..2^32", i, dim));
    }
  }
  const uint64_t multiple = m.interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16;
  // What the stride of dim i+1 has to step over: the extent of dims 0..i.
  uint64_t extent = m.global_dims[0] * element_bytes;
  for (size_t i = 0; i + 1 < rank; ++i) {
    const uint64_t stride = m.global_strides[i];
    if (stride % multiple != 0 || stride >= kStrideLimit) {
      refuse(fmt::format("global_strides[{}] = {} B (the stride of dims[{}]) must be a multiple "
                         "of {} and below 2^40; strides are in bytes, not elements",
                         i, stride, i + 1, multiple));
    }
    // Interleaved layouts count dims differently; the overlap rule is for plain ones.
    if (m.interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && stride < extent) {
      refuse(fmt::format("global_strides[{}] = {} B is smaller than the {} B that dims[0..{}] "
                         "span, so consecutive slices would overlap; strides are in bytes, not "
                         "elements ({} B each)",
                         i, stride, extent, i, element_bytes));
    }
    extent = saturating_product(stride, m.global_dims[i + 1]);
  }
}

void check_box(const TiledTensorMap& m, size_t element_bytes) {
  const size_t rank = rank_of(m);
  for (size_t i = 0; i < rank; ++i) {
    if (m.box_dims[i] < 1 || m.box_dims[i] > kMaxBoxDim) {
      refuse(fmt::format("box_dims[{}] = {} is outside 1..{}", i, m.box_dims[i], kMaxBoxDim));
    }
    if (!m.element_strides.empty() &&
        (m.element_strides[i] < 1 || m.element_strides[i] > kMaxElementStride)) {
      refuse(fmt::format("element_strides[{}] = {} is outside 1..{}", i, m.element_strides[i],
                         kMaxElementStride));
    }
  }
  if (m.interleave != CU_TENSOR_MAP_INTERLEAVE_NONE) return;
  const uint64_t inner_bytes = uint64_t{m.box_dims[0]} * element_bytes;
  if (inner_bytes % 16 != 0) {
    refuse(fmt::format("box_dims[0] = {} elements of {} B = {} B is not a multiple of 16 B",
                       m.box_dims[0], element_bytes, inner_bytes));
  }
  const uint64_t span = swizzle_span(m.swizzle);
  if (span != 0 && inner_bytes > span) {
    refuse(fmt::format("box_dims[0] = {} elements of {} B = {} B exceeds the {} swizzle span of "
                       "{} B; use a box of at most {} elements in dims[0] or a wider swizzle",
                       m.box_dims[0], element_bytes, inner_bytes, swizzle_name(m.swizzle), span,
                       span / element_bytes));
  }
}

std::string describe(const TiledTensorMap& m) {
  return fmt::format("dtype {}, dims [{}], strides [{}] B, box [{}], swizzle {}",
                     static_cast<int>(m.dtype), fmt::join(m.global_dims, ", "),
                     fmt::join(m.global_strides, ", "), fmt::join(m.box_dims, ", "),
                     swizzle_name(m.swizzle));
}

}  // namespace

size_t tensor_map_element_bytes(CUtensorMapDataType dtype) {
  switch (dtype) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return 4;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 8;
    default: break;
  }
  refuse(fmt::format("dtype {} is not supported here: the packed sub-byte types (16U4, 16U6) "
                     "have their own layout rules; use a byte-sized CUtensorMapDataType (an FP8 "
                     "tensor travels as UINT8)",
                     static_cast<int>(dtype)));
}

void check_tensor_map(const TiledTensorMap& map) {
  const size_t element_bytes = tensor_map_element_bytes(map.dtype);
  check_rank_and_counts(map);
  check_modes(map);
  check_address(map);
  check_global_extent(map, element_bytes);
  check_box(map, element_bytes);
}

CUtensorMap encode_tensor_map(const TiledTensorMap& map) {
  check_tensor_map(map);
  const detail::Api& cu = detail::api();
  const std::vector<uint32_t> ones(map.global_dims.size(), 1);
  const std::vector<uint32_t>& element_strides =
      map.element_strides.empty() ? ones : map.element_strides;
  CUtensorMap encoded{};
  CUresult result = cu.cuTensorMapEncodeTiled(
      &encoded, map.dtype, static_cast<cuuint32_t>(map.global_dims.size()),
      reinterpret_cast<void*>(map.global_address), map.global_dims.data(),
      map.global_strides.data(), map.box_dims.data(), element_strides.data(), map.interleave,
      map.swizzle, map.l2_promotion, map.oob_fill);
  check(result, fmt::format("cuTensorMapEncodeTiled ({})", describe(map)).c_str());
  return encoded;
}

}  // namespace mlajit::driver
