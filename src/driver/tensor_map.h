#pragma once
// TMA tensor maps (sm_90+): the 128-byte descriptor a kernel's cp.async.bulk.tensor reads to
// move a box of a global tensor into shared memory (swizzled, zero-filled past the edges) in
// one instruction issued by one thread. The descriptor is encoded on the host by
// cuTensorMapEncodeTiled and passed by value as a `const __grid_constant__` kernel parameter
// (TMA reads it from the parameter, constant or global space, never from a local copy).
//
// The driver answers a bad argument with a bare CUDA_ERROR_INVALID_VALUE, so every rule of
// cuTensorMapEncodeTiled that this layer's callers can break is checked first, naming the
// field, its value and what is allowed.
#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mlajit::driver {

// The kernel side declares its own 128-byte, 64-byte-aligned struct; these keep the two in
// step (CUDA 13's header aligns CUtensorMap to 128, which satisfies 64).
static_assert(sizeof(CUtensorMap) == 128, "a tensor map is 128 bytes");
static_assert(alignof(CUtensorMap) % 64 == 0, "a tensor map parameter must be 64-byte aligned");

// A tiled tensor map. Dimensions are listed innermost first: dims[0] is the contiguous one
// (the columns of a row-major matrix). Extents are in elements, strides in bytes.
struct TiledTensorMap {
  CUtensorMapDataType dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  CUdeviceptr global_address = 0;         // 16-byte aligned (32 with 32B interleave)
  std::vector<uint64_t> global_dims;      // rank entries (rank 1..5), each 1..2^32
  // rank - 1 entries: the byte stride of dims 1..rank-1 (dims[0] is contiguous by
  // definition). Multiples of 16, below 2^40, and not smaller than the extent they step over.
  std::vector<uint64_t> global_strides;
  std::vector<uint32_t> box_dims;         // rank entries, 1..256: the box one copy moves
  std::vector<uint32_t> element_strides;  // rank entries, 1..8; empty means all 1
  CUtensorMapInterleave interleave = CU_TENSOR_MAP_INTERLEAVE_NONE;
  // NONE, 32B, 64B or 128B. The box's inner extent in bytes must not exceed the span, and the
  // shared-memory destination must be aligned to the swizzle's repeat (1024 B for 128B).
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  CUtensorMapL2promotion l2_promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
  // FILL_NONE fills out-of-bounds elements with zeros (what attention tiles past the end of
  // the KV need); NAN_REQUEST_ZERO_FMA is for floating-point dtypes only.
  CUtensorMapFloatOOBfill oob_fill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
};

// Bytes per element of a tensor-map dtype. Throws Error(kInvalidArgument) for the packed
// sub-byte types (16U4, 16U6), which this layer does not encode, and for values outside the
// enum.
size_t tensor_map_element_bytes(CUtensorMapDataType dtype);

// Checks `map` against the rules of cuTensorMapEncodeTiled. Throws Error(kInvalidArgument)
// naming the field, the value and what is allowed. Needs no driver.
void check_tensor_map(const TiledTensorMap& map);

// check_tensor_map, then cuTensorMapEncodeTiled. Throws Error(kCudaError) naming the call
// when the driver refuses it anyway, and kNoDriver/kNoDevice without a usable driver.
CUtensorMap encode_tensor_map(const TiledTensorMap& map);

}  // namespace mlajit::driver
