// The tensor-map wrapper's argument checks: every rule of cuTensorMapEncodeTiled a caller can
// break is refused before the driver is asked, naming the field and what is allowed. These run
// without a GPU; tests/gpu/test_driver_launch_gpu.cpp encodes real maps and loads through them.
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "driver/cuda_driver.h"
#include "driver/tensor_map.h"
#include "mlajit/error.h"

namespace drv = mlajit::driver;
using mlajit::Error;
using mlajit::ErrorCode;

namespace {

// A bf16 matrix of 100 rows x 200 columns (400-byte rows), read in 32 x 64 boxes with the
// 128B swizzle: the shape of the GPU probe.
drv::TiledTensorMap valid_map() {
  drv::TiledTensorMap map;
  map.dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  map.global_address = 0x7f0000100000ull;
  map.global_dims = {200, 100};
  map.global_strides = {400};
  map.box_dims = {64, 32};
  map.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  return map;
}

// The message of the kInvalidArgument that check_tensor_map must throw for `map`.
std::string refusal(const drv::TiledTensorMap& map) {
  try {
    drv::check_tensor_map(map);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    return e.what();
  }
  FAIL("check_tensor_map accepted the map");
  return "";
}

struct Refused {
  const char* what;
  std::function<void(drv::TiledTensorMap&)> edit;
  std::vector<const char*> message_parts;
};

}  // namespace

TEST_CASE("a valid 2-D and 3-D tensor map passes the checks") {
  CHECK_NOTHROW(drv::check_tensor_map(valid_map()));
  drv::TiledTensorMap paged = valid_map();  // [pages][rows][cols], each page padded by a row
  paged.global_dims = {512, 64, 10};
  paged.global_strides = {1024, 1024 * 65};
  paged.box_dims = {64, 64, 1};
  paged.element_strides = {1, 1, 1};
  CHECK_NOTHROW(drv::check_tensor_map(paged));
  drv::TiledTensorMap unswizzled = valid_map();  // without a swizzle the box may be wider
  unswizzled.swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
  unswizzled.box_dims = {200, 8};
  CHECK_NOTHROW(drv::check_tensor_map(unswizzled));
}

TEST_CASE("every broken rule of cuTensorMapEncodeTiled is refused, naming the field") {
  const std::vector<Refused> cases = {
      {"no dims", [](auto& m) { m.global_dims.clear(); m.box_dims.clear(); m.global_strides.clear(); },
       {"rank 0", "1..5"}},
      {"rank 6",
       [](auto& m) {
         m.global_dims.assign(6, 2);
         m.global_strides.assign(5, 1024);
         m.box_dims.assign(6, 2);
       },
       {"rank 6", "1..5"}},
      {"stride count", [](auto& m) { m.global_strides = {400, 40000}; },
       {"global_strides has 2 entries", "rank - 1 = 1"}},
      {"box count", [](auto& m) { m.box_dims = {64}; }, {"box_dims has 1 entries", "rank 2"}},
      {"element stride count", [](auto& m) { m.element_strides = {1}; },
       {"element_strides has 1 entries"}},
      {"null address", [](auto& m) { m.global_address = 0; }, {"global_address is null"}},
      {"misaligned address", [](auto& m) { m.global_address += 8; },
       {"not 16-byte aligned", "8 bytes past"}},
      {"zero dim", [](auto& m) { m.global_dims[1] = 0; }, {"global_dims[1] = 0", "1..2^32"}},
      {"dim above 2^32", [](auto& m) { m.global_dims[1] = (1ull << 32) + 1; },
       {"global_dims[1] = 4294967297"}},
      {"stride not a multiple of 16", [](auto& m) { m.global_strides = {408}; },
       {"global_strides[0] = 408", "multiple of 16"}},
      {"stride at 2^40", [](auto& m) { m.global_strides = {1ull << 40}; },
       {"global_strides[0]", "below 2^40"}},
      {"stride in elements, not bytes",
       [](auto& m) {
         m.global_dims = {256, 100};
         m.global_strides = {256};
       },
       {"global_strides[0] = 256", "smaller than the 512 B", "bytes, not elements"}},
      {"outer stride overlapping", [](auto& m) {
         m.global_dims = {64, 8, 4};
         m.global_strides = {128, 512};
         m.box_dims = {64, 8, 1};
       },
       {"global_strides[1] = 512", "smaller than the 1024 B"}},
      {"box of 0", [](auto& m) { m.box_dims[1] = 0; }, {"box_dims[1] = 0", "1..256"}},
      {"box of 257", [](auto& m) {
         m.swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
         m.box_dims[1] = 257;
       },
       {"box_dims[1] = 257", "1..256"}},
      {"inner box not 16 bytes", [](auto& m) { m.box_dims[0] = 4; },
       {"box_dims[0] = 4 elements of 2 B = 8 B", "multiple of 16"}},
      {"inner box wider than the 128B swizzle", [](auto& m) { m.box_dims[0] = 72; },
       {"144 B exceeds the 128B swizzle span of 128 B", "at most 64 elements"}},
      {"inner box wider than the 64B swizzle", [](auto& m) { m.swizzle = CU_TENSOR_MAP_SWIZZLE_64B; },
       {"128 B exceeds the 64B swizzle span of 64 B", "at most 32 elements"}},
      {"element stride 9", [](auto& m) { m.element_strides = {1, 9}; },
       {"element_strides[1] = 9", "1..8"}},
      {"packed dtype", [](auto& m) { m.dtype = CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B; },
       {"packed sub-byte"}},
      {"a 128B_ATOM swizzle", [](auto& m) { m.swizzle = CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B; },
       {"swizzle 4 is not supported", "NONE, 32B, 64B or 128B"}},
      {"interleave on rank 2", [](auto& m) { m.interleave = CU_TENSOR_MAP_INTERLEAVE_16B; },
       {"needs rank 3"}},
      {"32B interleave with a 128B swizzle",
       [](auto& m) {
         m.interleave = CU_TENSOR_MAP_INTERLEAVE_32B;
         m.global_dims = {64, 8, 4};
         m.global_strides = {128, 1024};
         m.box_dims = {16, 8, 1};
       },
       {"interleave 32B needs swizzle 32B"}},
      {"32B interleave on a 16-byte aligned address",
       [](auto& m) {
         m.interleave = CU_TENSOR_MAP_INTERLEAVE_32B;
         m.swizzle = CU_TENSOR_MAP_SWIZZLE_32B;
         m.global_dims = {64, 8, 4};
         m.global_strides = {128, 1024};
         m.box_dims = {16, 8, 1};
         m.global_address += 16;
       },
       {"not 32-byte aligned", "interleave 32B"}},
      {"NaN fill on an integer dtype",
       [](auto& m) {
         m.dtype = CU_TENSOR_MAP_DATA_TYPE_UINT16;
         m.oob_fill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
       },
       {"NAN_REQUEST_ZERO_FMA needs a floating-point dtype"}},
      // No L2-promotion case: every value the enum can hold (0..3) is valid, and storing 7 in
      // it is undefined behaviour (UBSan reports the load).
  };
  for (const Refused& c : cases) {
    INFO(c.what);
    drv::TiledTensorMap map = valid_map();
    c.edit(map);
    const std::string message = refusal(map);
    INFO(message);
    CHECK(message.find("cuTensorMapEncodeTiled") != std::string::npos);
    for (const char* part : c.message_parts) CHECK(message.find(part) != std::string::npos);
  }
}

TEST_CASE("element sizes follow the dtype, and FP8 travels as UINT8") {
  CHECK(drv::tensor_map_element_bytes(CU_TENSOR_MAP_DATA_TYPE_UINT8) == 1);
  CHECK(drv::tensor_map_element_bytes(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16) == 2);
  CHECK(drv::tensor_map_element_bytes(CU_TENSOR_MAP_DATA_TYPE_FLOAT16) == 2);
  CHECK(drv::tensor_map_element_bytes(CU_TENSOR_MAP_DATA_TYPE_FLOAT32) == 4);
  CHECK(drv::tensor_map_element_bytes(CU_TENSOR_MAP_DATA_TYPE_FLOAT64) == 8);
  CHECK_THROWS_AS(drv::tensor_map_element_bytes(CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B), Error);
  CHECK_THROWS_AS(drv::tensor_map_element_bytes(CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B), Error);
}

TEST_CASE("a bad tensor map is refused before the driver is asked; a good one needs a driver") {
  drv::TiledTensorMap bad = valid_map();
  bad.box_dims[0] = 128;
  try {
    drv::encode_tensor_map(bad);
    FAIL("encode_tensor_map accepted a 256-byte inner box under the 128B swizzle");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);  // not kNoDriver, even without a driver
  }
  if (drv::driver_available()) {
    WARN("the rest is skipped: this machine has a usable CUDA driver (the GPU tests encode maps)");
    return;
  }
  try {
    drv::encode_tensor_map(valid_map());
    FAIL("encode_tensor_map succeeded without a usable driver");
  } catch (const Error& e) {
    CHECK((e.code() == ErrorCode::kNoDriver || e.code() == ErrorCode::kNoDevice));
  }
}
