// libFuzzer target: the spec-text parser (KernelSpec::parse), which reads `mlajit precompile`
// arguments, shipped cache listings and cache-entry metadata.
// Must never crash or throw anything but mlajit::Error; whatever it accepts must round-trip:
// parse(spec.text()) gives the same spec, and text() is stable. The shared-memory formula
// codegen sizes a launch with is run on every accepted spec too (UBSan watches its arithmetic):
// it may refuse a tile only with kInvalidArgument, and what it accepts fits an int.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "family/portable/portable_tiles.h"
#include "mlajit/error.h"
#include "mlajit/kernel_spec.h"

namespace {

[[noreturn]] void violated(const char* what, const std::string& text) {
  std::fprintf(stderr, "fuzz_kernel_spec: invariant violated: %s (text \"%s\")\n", what,
               text.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  mlajit::KernelSpec spec;
  try {
    spec = mlajit::KernelSpec::parse(text);
  } catch (const mlajit::Error& e) {
    if (e.code() != mlajit::ErrorCode::kInvalidArgument) violated("wrong error code", text);
    return 0;
  }
  const std::string canonical = spec.text();
  mlajit::KernelSpec again;
  try {
    again = mlajit::KernelSpec::parse(canonical);
  } catch (const mlajit::Error&) {
    violated("text() of an accepted spec is refused", canonical);
  }
  if (again.text() != canonical) violated("text() is not stable", canonical);
  if (spec.head_dim_ckv < 1 || spec.head_dim_kpe < 1 || spec.tile.kv_tile < 1 ||
      spec.tile.q_tile < 1 || spec.tile.num_stages < 1) {
    violated("accepted a non-positive number", text);
  }
  try {
    if (mlajit::family::portable::shared_storage_bytes(spec, spec.tile) <= 0) {
      violated("non-positive shared storage", canonical);
    }
  } catch (const mlajit::Error& e) {
    if (e.code() != mlajit::ErrorCode::kInvalidArgument) violated("wrong tile error code", canonical);
  }
  return 0;
}
