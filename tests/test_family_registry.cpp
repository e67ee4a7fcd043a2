// The kernel-family registry and its public face (runtime.h): names, the one selection of a
// family for a shape on a device, and the errors for unknown names and unsupported shapes.
#include <catch2/catch.hpp>

#include <string>

#include "family/family_registry.h"
#include "mlajit/error.h"
#include "mlajit/runtime.h"

using mlajit::DType;
using mlajit::Error;
using mlajit::ErrorCode;
using mlajit::MlaShape;
using namespace mlajit::family;

namespace {

bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// The message `call` throws, after checking the error code; no throw fails the test.
template <typename Call>
std::string refusal(ErrorCode code, const Call& call) {
  try {
    call();
  } catch (const Error& error) {
    CHECK(error.code() == code);
    return error.what();
  }
  FAIL("the call was accepted");
  return "";
}

MlaShape fp8_kv_shape() {
  MlaShape shape;
  shape.kv_dtype = DType::kFloat8E4M3;
  return shape;
}

}  // namespace

TEST_CASE("the registry lists the families in preference order and finds them by name") {
  REQUIRE_FALSE(kernel_families().empty());
  REQUIRE(kernel_families().size() == 2);
  CHECK(kernel_families()[0]->name() == std::string("hopper"));  // preferred where it runs
  CHECK(kernel_families()[1]->name() == std::string("portable"));
  CHECK(&find_family("portable") == kernel_families()[1]);
  CHECK(family_named("spin") == nullptr);  // a utility program, not a family
  CHECK(family_named("auto") == nullptr);
  const std::string unknown = refusal(ErrorCode::kInvalidArgument, [] { find_family("hoppr"); });
  CHECK(contains(unknown, "'hoppr'"));
  CHECK(contains(unknown, "auto, hopper, portable"));
  CHECK(all_head_dims() == std::vector<HeadDims>{{512, 64}, {256, 32}});
}

TEST_CASE("auto selects the first family that runs the shape on the device") {
  const MlaShape shape;
  // hopper: 32 heads or more on compute capability 9.0; fewer heads, other archs: portable.
  CHECK(&select_family(shape, profile_target("sm_90"), kAutoFamily) == &find_family("hopper"));
  MlaShape narrow = shape;
  narrow.num_heads = 31;
  CHECK(&select_family(narrow, profile_target("sm_90"), kAutoFamily) == &find_family("portable"));
  narrow.num_heads = 32;
  CHECK(&select_family(narrow, profile_target("sm_90"), kAutoFamily) == &find_family("hopper"));
  CHECK(&select_family(shape, profile_target("sm_100"), kAutoFamily) ==
        &find_family("portable"));
  CHECK(&select_family(shape, profile_target("sm_90"), "hopper") == &find_family("hopper"));
  CHECK(&select_family(shape, profile_target("sm_80"), "portable") == &find_family("portable"));
  DeviceTarget turing = profile_target("sm_80");
  turing.arch = "sm_75";
  turing.cc_major = 7;
  turing.cc_minor = 5;
  const std::string forced =
      refusal(ErrorCode::kUnsupported, [&] { select_family(shape, turing, "portable"); });
  CHECK(contains(forced, "kernel family 'portable' cannot run this shape on sm_75"));
  CHECK(contains(forced, "compute capability 8.0"));
  const std::string none =
      refusal(ErrorCode::kUnsupported, [&] { select_family(shape, turing, kAutoFamily); });
  CHECK(contains(none, "no kernel family runs this shape on sm_75"));
  CHECK(contains(none, "portable: "));
  refusal(ErrorCode::kInvalidArgument, [&] { select_family(shape, turing, "hoppr"); });
}

TEST_CASE("a forced tile tier needs a family with tile tiers") {
  const MlaShape shape;
  CHECK(&select_family(shape, profile_target("sm_90"), kAutoFamily, 2) ==
        &find_family("portable"));
  CHECK(&select_family(shape, profile_target("sm_90"), "portable", 3) ==
        &find_family("portable"));
  const std::string refused =
      refusal(ErrorCode::kUnsupported, [&] { select_family(shape, profile_target("sm_90"),
                                                           "hopper", 2); });
  CHECK(contains(refused, "force_tier=2"));
  CHECK(contains(refused, "kernel family 'hopper' has one tile config"));
  CHECK(&select_family(shape, profile_target("sm_90"), "hopper", 0) == &find_family("hopper"));
}

TEST_CASE("a request is checked against the families before any device is known") {
  check_request(MlaShape{}, kAutoFamily);
  check_request(MlaShape{}, "portable");
  check_request(fp8_kv_shape(), kAutoFamily);
  check_request(fp8_kv_shape(), "portable");
  check_request(fp8_kv_shape(), "hopper");
  MlaShape mixed;
  mixed.kv_dtype = DType::kFloat16;
  const std::string forced =
      refusal(ErrorCode::kUnsupported, [&] { check_request(mixed, "hopper"); });
  CHECK(contains(forced, "KV of that dtype or e4m3"));
  MlaShape odd;
  odd.head_dim_ckv = 384;
  CHECK(contains(refusal(ErrorCode::kUnsupported, [&] { check_request(odd, kAutoFamily); }),
                 "ckv=384"));
  CHECK(contains(refusal(ErrorCode::kInvalidArgument, [] { check_request(MlaShape{}, "mla_fa2"); }),
                 "auto, hopper, portable"));
}

TEST_CASE("the public API lists the families and says which one a shape gets") {
  const auto families = mlajit::kernel_families();
  REQUIRE(families.size() == kernel_families().size());
  CHECK(families[0].name == "hopper");
  CHECK(families[0].head_dims == std::vector<std::string>{"512/64"});
  CHECK(families[0].archs == std::vector<std::string>{"sm_90"});
  CHECK(families[1].name == "portable");
  CHECK(families[1].head_dims == std::vector<std::string>{"512/64", "256/32"});
  CHECK(families[1].archs.size() == 10);  // every profiled arch
  CHECK_FALSE(families[1].summary.empty());
  CHECK(mlajit::kernel_family("portable").name == "portable");
  refusal(ErrorCode::kInvalidArgument, [] { mlajit::kernel_family("auto"); });

  CHECK(mlajit::tile_for_arch("sm_90a", MlaShape{}).family == "hopper");
  MlaShape sixteen_heads;
  sixteen_heads.num_heads = 16;
  // 16 heads: hopper on whole-tile pages (its TMA path), portable on smaller ones.
  CHECK(mlajit::tile_for_arch("sm_90a", sixteen_heads).family == "hopper");
  sixteen_heads.page_size = 16;
  CHECK(mlajit::tile_for_arch("sm_90a", sixteen_heads).family == "portable");
  sixteen_heads.num_heads = 8;
  sixteen_heads.page_size = 64;
  const mlajit::TileChoice choice = mlajit::tile_for_arch("sm_90a", sixteen_heads);
  CHECK(choice.family == "portable");
  CHECK(choice.tier == 1);
  CHECK(choice.shared_bytes == 221696);
  CHECK(contains(choice.spec_text, "portable;"));
  CHECK(contains(choice.spec_text, "arch=sm_90a"));
  mlajit::MlaOptions options;
  options.kernel = "portable";
  options.force_tier = 2;
  CHECK(mlajit::tile_for_arch("sm_90", MlaShape{}, options).tier == 2);
  options.kernel = "hoppr";
  CHECK(contains(refusal(ErrorCode::kInvalidArgument,
                         [&] { mlajit::tile_for_arch("sm_90", MlaShape{}, options); }),
                 "auto, hopper, portable"));
  // An e4m3 cache goes to the hopper family from 32 heads and to the portable family's
  // narrow streams at 16; both tiles hold 16-bit KV, so the shared memory is the bf16 cache's.
  const mlajit::TileChoice fp8 = mlajit::tile_for_arch("sm_90a", fp8_kv_shape());
  CHECK(fp8.family == "hopper");
  CHECK(fp8.shared_bytes == 231288);
  CHECK(contains(fp8.spec_text, "kv=e4m3"));
  MlaShape fp8_heads = fp8_kv_shape();
  for (int heads : {32, 64}) {
    fp8_heads.num_heads = heads;
    INFO(heads << " heads over e4m3");
    CHECK(mlajit::tile_for_arch("sm_90a", fp8_heads).family == "hopper");
  }
  for (int page : {1, 64}) {  // at 16 heads on any page: the narrow streams
    fp8_heads.num_heads = 16;
    fp8_heads.page_size = page;
    const mlajit::TileChoice narrow = mlajit::tile_for_arch("sm_90a", fp8_heads);
    CHECK(narrow.family == "portable");
    CHECK(narrow.shared_bytes == 221696);
  }
  options.kernel = "hopper";
  options.force_tier = 0;
  const mlajit::TileChoice forced = mlajit::tile_for_arch("sm_90", fp8_kv_shape(), options);
  CHECK(forced.family == "hopper");
  CHECK(contains(forced.spec_text, "kv=e4m3"));
  CHECK(contains(forced.spec_text, "arch=sm_90a"));
}
