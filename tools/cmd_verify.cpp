// `mlajit verify`: the kernel on the local GPU against the float64 CPU reference, over
// eighteen shapes that cover both dtypes, both head-dim pairs, head counts, page sizes, causal
// speculative decode, the three tile tiers, the two-launch path and the FP8 (e4m3) KV cache.
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "check/mla_check.h"
#include "cli_support.h"
#include "commands.h"
#include "json_writer.h"
#include "mlajit/error.h"
#include "mlajit/runtime.h"

namespace mlajit::cli {
namespace {

constexpr double kBf16Tolerance = 1e-2;
constexpr double kFp16Tolerance = 3e-3;

struct VerifyArgs {
  bool json = false;
  bool quick = false;
  int device = 0;
  std::string kernel = "auto";
  uint64_t seed = 20261129;
};

struct CaseShape {
  const char* name;
  int heads, page, q_len;
  bool causal;
  DType dtype;
  int ckv, kpe;
  int force_tier;
  bool two_launch;
  bool quick;  // part of --quick
  std::optional<DType> kv_dtype = std::nullopt;  // unset: the same as dtype
  bool device_scales = false;  // e4m3: the KV scales as device pointers, not floats
  // e4m3 with DeepSeek-V3.2's per-token scales, in its 656-byte token rows.
  bool token_scales = false;
};

// Batches of 6 requests, kv_len in [1, 1100]: long enough for several KV tiles and splits,
// short enough that the float64 reference takes about a second per case.
const std::vector<CaseShape>& verify_shapes() {
  constexpr auto bf16 = DType::kBFloat16;
  constexpr auto f16 = DType::kFloat16;
  constexpr auto e4m3 = DType::kFloat8E4M3;
  static const std::vector<CaseShape> shapes{
      {"decode H128 page64 bf16", 128, 64, 1, false, bf16, 512, 64, 0, false, true},
      {"decode H16 page1 bf16", 16, 1, 1, false, bf16, 512, 64, 0, false, false},
      {"decode H128 page1 f16", 128, 1, 1, false, f16, 512, 64, 0, false, false},
      {"decode H16 page64 f16", 16, 64, 1, false, f16, 512, 64, 0, false, true},
      {"causal q2 H128 page64 bf16", 128, 64, 2, true, bf16, 512, 64, 0, false, true},
      {"causal q2 H16 page1 f16", 16, 1, 2, true, f16, 512, 64, 0, false, false},
      {"256/32 H16 page64 bf16", 16, 64, 1, false, bf16, 256, 32, 0, false, true},
      {"256/32 causal q2 H128 page1 f16", 128, 1, 2, true, f16, 256, 32, 0, false, false},
      {"tier 1 H128 page64 bf16", 128, 64, 1, false, bf16, 512, 64, 1, false, false},
      {"tier 2 H128 page64 bf16", 128, 64, 1, false, bf16, 512, 64, 2, false, false},
      {"tier 3 H16 page64 f16", 16, 64, 1, false, f16, 512, 64, 3, false, false},
      {"two-launch H128 page64 bf16", 128, 64, 1, false, bf16, 512, 64, 0, true, true},
      {"two-launch causal q2 H16 page1 bf16", 16, 1, 2, true, bf16, 512, 64, 0, true, false},
      // FP8 KV: the reference reads the dequantized values, so the tolerance stays the
      // output dtype's (only the kernel's 16-bit rounding separates them).
      {"e4m3 decode H128 page64 bf16", 128, 64, 1, false, bf16, 512, 64, 0, false, true, e4m3},
      {"e4m3 causal q2 H16 page1 f16 dev-scale", 16, 1, 2, true, f16, 512, 64, 0, false, false,
       e4m3, true},
      {"e4m3 tier 2 H128 page64 bf16", 128, 64, 1, false, bf16, 512, 64, 2, false, false, e4m3},
      {"e4m3 tier 3 H16 page64 f16", 16, 64, 1, false, f16, 512, 64, 3, false, false, e4m3},
      {"e4m3 256/32 H16 page64 bf16", 16, 64, 1, false, bf16, 256, 32, 0, false, false, e4m3},
      {"e4m3 per-token scales (V3.2 rows) H128 page64 bf16", 128, 64, 1, false, bf16, 512, 64, 0,
       false, false, e4m3, false, true},
      {"e4m3 per-token scales (V3.2 rows) causal q2 H16 page1 bf16", 16, 1, 2, true, bf16, 512, 64,
       0, false, false, e4m3, false, true},
  };
  return shapes;
}

MlaCheckCase make_case(const CaseShape& shape, int device, const std::string& kernel,
                       uint64_t seed) {
  MlaShape mla;
  mla.num_heads = shape.heads;
  mla.page_size = shape.page;
  mla.causal = shape.causal;
  mla.dtype = shape.dtype;
  mla.head_dim_ckv = shape.ckv;
  mla.head_dim_kpe = shape.kpe;
  mla.kv_dtype = shape.kv_dtype;
  if (shape.token_scales) mla.kv_scales = KvScales::kPerToken128;
  MlaCheckCase check = make_random_case(shape.name, mla, 6, shape.q_len, 1, 1100, seed);
  check.concatenated_kv = shape.token_scales;
  check.options.device = device;
  check.options.kernel = kernel;
  check.options.force_tier = shape.force_tier;
  check.options.force_two_launch = shape.two_launch;
  check.kv_scales_on_device = shape.device_scales;
  return check;
}

struct CaseOutcome {
  const CaseShape* shape = nullptr;
  uint64_t seed = 0;
  double tolerance = 0;
  MlaCheckResult result;
  std::string error;  // the case threw
  std::string skipped;  // why the case does not apply to this device
  bool passed = false;
};

// A case the named family cannot compute (its head dims, its arch) and a forced tier that needs
// more shared memory than the device has are not failures of the kernel: the case is skipped,
// saying so.
std::string case_does_not_apply(const MlaCheckCase& check, const DeviceSummary& device) {
  TileChoice choice;
  try {
    choice = tile_for(device.ordinal, check.shape, check.options);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kUnsupported || check.options.kernel == "auto") throw;
    return e.what();
  }
  if (check.options.force_tier == 0 || choice.shared_bytes <= device.smem_per_block_optin) {
    return "";
  }
  return fmt::format("tier {} needs {} B of shared memory; the device has {} B per block",
                     check.options.force_tier, choice.shared_bytes, device.smem_per_block_optin);
}

CaseOutcome run_case(const CaseShape& shape, const VerifyArgs& args,
                     const DeviceSummary& device, uint64_t seed) {
  CaseOutcome outcome;
  outcome.shape = &shape;
  outcome.seed = seed;
  outcome.tolerance = shape.dtype == DType::kBFloat16 ? kBf16Tolerance : kFp16Tolerance;
  try {
    const MlaCheckCase check = make_case(shape, device.ordinal, args.kernel, seed);
    outcome.skipped = case_does_not_apply(check, device);
    if (!outcome.skipped.empty()) {
      outcome.passed = true;  // counts as no failure
      return outcome;
    }
    outcome.result = run_mla_check(check);
    outcome.passed = outcome.result.passed(outcome.tolerance);
  } catch (const Error& e) {
    outcome.error = fmt::format("{}: {}", error_code_name(e.code()), e.what());
  }
  return outcome;
}

}  // namespace

void require_gpu(const char* command, int device) {
  if (!driver_available()) {
    throw Error(ErrorCode::kNoDriver,
                fmt::format("{} needs a GPU: {}", command, driver_unavailable_reason()));
  }
  const int count = device_count();
  if (device >= count) {
    throw Error(ErrorCode::kNoDevice,
                fmt::format("{} needs a GPU: device {} requested, {} present", command,
                            device, count));
  }
}

namespace {

std::string verdict(const CaseOutcome& outcome) {
  if (!outcome.skipped.empty()) return "skip";
  if (!outcome.error.empty()) return "ERROR";
  return outcome.passed ? "pass" : "FAIL";
}

void print_table(const std::vector<CaseOutcome>& outcomes) {
  Table table({"case", "seed", "out err", "lse err", "tol", "tier", "path", "ms", "result"},
              {false, true, true, true, true, true, false, true, false});
  for (const auto& o : outcomes) {
    const bool ran = o.error.empty() && o.skipped.empty();
    table.add_row({o.shape->name, std::to_string(o.seed),
                   ran ? fmt::format("{:.2e}", o.result.out_error) : "-",
                   ran ? fmt::format("{:.2e}", o.result.lse_error) : "-",
                   fmt::format("{:.0e}", o.tolerance), ran ? std::to_string(o.result.plan.tier) : "-",
                   ran ? (o.result.plan.two_launch ? "two-launch" : "cooperative") : "-",
                   ran ? fmt::format("{:.1f}", o.result.seconds * 1e3) : "-", verdict(o)});
  }
  table.print(stdout);
  for (const auto& o : outcomes) {
    if (!o.error.empty()) std::printf("%s: %s\n", o.shape->name, o.error.c_str());
    if (!o.skipped.empty()) std::printf("%s: skipped: %s\n", o.shape->name, o.skipped.c_str());
    if (o.error.empty() && !o.passed && !o.result.all_written) {
      std::printf("%s: some outputs were never written (NaN poison left)\n", o.shape->name);
    }
    if (o.error.empty() && !o.passed && !o.result.lse_infinities_match) {
      std::printf("%s: lse is -inf where the reference is not, or the other way\n", o.shape->name);
    }
  }
}

Json outcomes_json(const std::vector<CaseOutcome>& outcomes, const DeviceSummary& device,
                   size_t failures) {
  Json cases = Json::array();
  for (const auto& o : outcomes) {
    Json entry = Json::object();
    entry.set("name", o.shape->name).set("seed", o.seed).set("tolerance", o.tolerance);
    entry.set("kv_dtype", dtype_name(o.shape->kv_dtype.value_or(o.shape->dtype)));
    entry.set("passed", o.passed);
    if (!o.error.empty() || !o.skipped.empty()) {
      cases.push(std::move(o.error.empty() ? entry.set("skipped", o.skipped)
                                           : entry.set("error", o.error)));
      continue;
    }
    entry.set("out_error", o.result.out_error).set("lse_error", o.result.lse_error);
    entry.set("all_written", o.result.all_written);
    entry.set("lse_infinities_match", o.result.lse_infinities_match);
    entry.set("tier", o.result.plan.tier).set("two_launch", o.result.plan.two_launch);
    entry.set("cluster_size", o.result.plan.cluster_size).set("seconds", o.result.seconds);
    cases.push(std::move(entry));
  }
  Json report = Json::object();
  report.set("device", device.name).set("arch", device.arch);
  report.set("cases", outcomes.size()).set("failures", failures).set("results", std::move(cases));
  return report;
}

int run_verify(const VerifyArgs& args) {
  check_kernel_option(args.kernel);
  require_gpu("verify", args.device);
  const DeviceSummary device = device_summary(args.device);
  std::vector<CaseOutcome> outcomes;
  uint64_t seed = args.seed;
  for (const auto& shape : verify_shapes()) {
    if (args.quick && !shape.quick) continue;
    outcomes.push_back(run_case(shape, args, device, seed++));
    if (!args.json) {
      std::fprintf(stderr, "%-40s %s\n", shape.name, verdict(outcomes.back()).c_str());
    }
  }
  size_t failures = 0;
  for (const auto& o : outcomes) failures += !o.passed;
  if (args.json) {
    std::printf("%s\n", outcomes_json(outcomes, device, failures).dump().c_str());
  } else {
    std::printf("%s (%s), first seed %llu\n", device.name.c_str(), device.arch.c_str(),
                static_cast<unsigned long long>(args.seed));
    print_table(outcomes);
    size_t skipped = 0;
    for (const auto& o : outcomes) skipped += !o.skipped.empty();
    std::printf("%zu of %zu cases passed (%zu skipped)\n", outcomes.size() - failures - skipped,
                outcomes.size() - skipped, skipped);
  }
  return failures == 0 ? kExitOk : kExitFailure;
}

}  // namespace

Command add_verify_command(CLI::App& parent) {
  auto args = std::make_shared<VerifyArgs>();
  CLI::App* app = parent.add_subcommand(
      "verify",
      "Check the kernel on the local GPU against the float64 CPU reference over 20 shapes "
      "(H 16/128, page 1/64, causal q_len 2, bf16/f16, 512/64 and 256/32, tiers 1-3, "
      "two-launch, an FP8 e4m3 KV cache with float or device scales, and DeepSeek-V3.2's "
      "656-byte rows with per-token scales, checked against the dequantized values). "
      "Tolerance: relative L2 error 1e-2 (bf16 output), 3e-3 (f16). Exits 1 on any failure, "
      "or without a GPU.");
  app->add_flag("--json", args->json, "print the results as JSON on stdout");
  app->add_flag("--quick", args->quick, "a subset of six cases (one with an e4m3 KV cache)");
  app->add_option("--device", args->device, "CUDA device ordinal")->check(CLI::NonNegativeNumber);
  app->add_option("--kernel", args->kernel,
                  "kernel family to check ('auto': the one each shape gets on the device)")
      ->capture_default_str();
  app->add_option("--seed", args->seed, "seed of the first case (each next case adds 1)")
      ->capture_default_str();
  return {app, [args] { return run_verify(*args); }};
}

}  // namespace mlajit::cli
