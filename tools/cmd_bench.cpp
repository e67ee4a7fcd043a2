// `mlajit bench`: times the kernel on the local GPU over the baseline shapes (or given ones)
// and compares with the FlashInfer FA2 / FA3 / FlashMLA numbers measured on the H200 (the
// peer timings built into the CLI, peer_timings.h).
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "check/mla_bench.h"
#include "cli_support.h"
#include "commands.h"
#include "csv.h"
#include "json_writer.h"
#include "mlajit/error.h"
#include "mlajit/runtime.h"
#include "peer_timings.h"
#include "roofline_plot.h"

namespace mlajit::cli {
namespace {

struct BenchArgs {
  std::vector<std::string> shapes;  // "H,B,L,page[,q_len,causal]", "ragged:H,B,MIN,MAX,SEED"
  std::string dtype;
  std::string kv_dtype;
  std::string kv_scales;
  bool causal = false;
  int q_len = 0;
  int tier = 0;
  bool batch_invariant = false;
  bool two_launch = false;
  bool contiguous_pages = false;
  int iterations = 30;
  int warmup = 5;
  int device = 0;
  std::string kernel = "auto";
  std::string csv;
  std::string plot;
  bool json = false;
  bool dry_run = false;
};

// A shape timed and the peers' times for it (none where the peers have no figure).
struct BenchRow {
  MlaBenchResult result;
  PeerTimings peers;
};

// The default shapes: every shape of the peer table (baseline.md's newest), then a second
// ragged batch and the shapes of its 2026-11-29 tables that the newest did not re-measure,
// kept because docs/PERF.md records them (16 heads at page size 1, fp16, the smaller tile
// tiers forced), then sparse top-k decode; these have no peer timings.
std::vector<MlaBenchShape> default_bench_shapes() {
  std::vector<MlaBenchShape> shapes;
  for (const PeerRow& row : peer_rows()) shapes.push_back(row.shape);
  auto add = [&](const char* text, DType dtype, int force_tier) {
    MlaBenchShape shape = parse_bench_shape(text);
    shape.dtype = dtype;
    shape.force_tier = force_tier;
    shapes.push_back(shape);
  };
  constexpr auto bf16 = DType::kBFloat16;
  // A second ragged batch, drawn as the first with another seed: the planner's balance on it
  // is not tuned to one draw.
  add("ragged:128,64,1,8192,20261201", bf16, 0);
  add("16,128,4096,1", bf16, 0);
  add("16,64,16384,1", bf16, 0);
  add("128,64,4096,64", DType::kFloat16, 0);
  add("16,128,16384,64", DType::kFloat16, 0);
  for (const char* text : {"128,64,4096,64", "16,128,16384,64"}) {
    add(text, bf16, 2);
    add(text, bf16, 3);
  }
  // DeepSeek-V3.2's sparse decode (DSA): top-k 2048 of a 64k-token cache; no peer timings.
  for (const char* text : {"topk:128,1,2048,65536", "topk:128,32,2048,65536",
                           "topk:128,128,2048,65536"}) {
    add(text, bf16, 0);
  }
  return shapes;
}

// Explicit shapes, else the default ones; the modifiers given on the line apply to all.
std::vector<MlaBenchShape> bench_shapes(const BenchArgs& args, const CLI::App& app) {
  std::vector<MlaBenchShape> shapes;
  as_usage("--shape", [&] {
    for (const auto& text : args.shapes) shapes.push_back(parse_bench_shape(text));
  });
  if (shapes.empty()) shapes = default_bench_shapes();
  for (auto& shape : shapes) {
    if (app.count("--dtype")) as_usage("--dtype", [&] { shape.dtype = parse_dtype(args.dtype); });
    if (app.count("--kv-dtype")) {
      as_usage("--kv-dtype", [&] { shape.kv_dtype = parse_dtype(args.kv_dtype); });
    }
    if (app.count("--kv-scales")) {
      as_usage("--kv-scales", [&] {
        shape.kv_scales = parse_kv_scales(args.kv_scales);
        if (shape.kv_scales != KvScales::kPerTensor && shape.kv_dtype != DType::kFloat8E4M3) {
          throw Error(ErrorCode::kInvalidArgument,
                      "--kv-scales token128 scales an e4m3 cache: give --kv-dtype e4m3 too");
        }
      });
    }
    if (app.count("--causal")) shape.causal = args.causal;
    if (app.count("--qlen")) shape.q_len = args.q_len;
    if (app.count("--tier")) shape.force_tier = args.tier;
    if (args.batch_invariant) shape.batch_invariant = true;
    if (args.two_launch) shape.two_launch = true;
    if (args.contiguous_pages) shape.contiguous_pages = true;
  }
  return shapes;
}

// A labelled shape (ragged, top-k) says its label instead of its dtypes, mask and tier; every
// shape says the plan's and launch's modifiers.
std::string variant_of(const MlaBenchShape& shape) {
  std::string variant = shape.label;
  auto add = [&](const std::string& word) { variant += (variant.empty() ? "" : " ") + word; };
  if (shape.label.empty()) {
    if (shape.dtype == DType::kFloat16) add("fp16");
    if (shape.kv_dtype && *shape.kv_dtype != shape.dtype) {
      add(std::string("kv ") + dtype_name(*shape.kv_dtype));
    }
    if (shape.kv_scales != KvScales::kPerTensor) add(kv_scales_name(shape.kv_scales));
    if (shape.causal) add("causal");
    if (shape.force_tier) add("tier" + std::to_string(shape.force_tier));
  }
  if (shape.batch_invariant) add("invariant");
  if (shape.two_launch) add("two-launch");
  if (shape.contiguous_pages) add("contiguous pages");
  return variant;
}

std::optional<double> ratio(const std::optional<double>& reference_us, double our_us) {
  if (!reference_us || *reference_us <= 0 || our_us <= 0) return std::nullopt;
  return *reference_us / our_us;
}

std::string ratio_text(const std::optional<double>& value) {
  return value ? fmt::format("{:.2f}x", *value) : "-";
}

std::string optional_number(const std::optional<double>& value, const char* format) {
  return value ? fmt::format(fmt::runtime(format), *value) : "";
}

int batch_of(const MlaBenchShape& shape) {
  return shape.ragged_kv_lens.empty() ? shape.batch : static_cast<int>(shape.ragged_kv_lens.size());
}

std::string kv_len_text(const MlaBenchShape& shape) {
  return shape.ragged_kv_lens.empty() ? std::to_string(shape.kv_len) : "ragged";
}

void print_table(const std::vector<BenchRow>& rows) {
  Table table({"H", "B", "L", "page", "q_len", "variant", "us", "GB/s", "TF/s", "vs FA2", "vs FA3",
               "vs FlashMLA"},
              {true, true, true, true, true, false, true, true, true, true, true, true});
  for (const auto& [r, peers] : rows) {
    table.add_row({std::to_string(r.shape.num_heads), std::to_string(batch_of(r.shape)),
                   kv_len_text(r.shape), std::to_string(r.shape.page_size),
                   std::to_string(r.shape.q_len), variant_of(r.shape),
                   fmt::format("{:.1f}", r.median_us), fmt::format("{:.0f}", r.gbps),
                   fmt::format("{:.1f}", r.tflops), ratio_text(ratio(peers.fa2_us, r.median_us)),
                   ratio_text(ratio(peers.fa3_us, r.median_us)),
                   ratio_text(ratio(peers.flashmla_us, r.median_us))});
  }
  table.print(stdout);
  std::printf("vs X = X's time / ours (above 1: we are faster); X: FlashInfer FA2/FA3 and "
              "FlashMLA on the H200, the newest table of shared/perf/baseline.md\n");
}

std::string csv_text(const std::vector<BenchRow>& rows) {
  std::string csv =
      "heads,batch,kv_len,page,q_len,variant,dtype,kv_dtype,causal,tier,median_us,min_us,max_us,"
      "gbps,tflops,fa2_us,fa3_us,flashmla_us,vs_fa2,vs_fa3,vs_flashmla,spec\n";
  for (const auto& [r, peers] : rows) {
    csv += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{:.3f},{:.3f},{:.3f},{:.1f},{:.3f},{},{},{},{},{},{},{}\n",
        r.shape.num_heads, batch_of(r.shape), kv_len_text(r.shape), r.shape.page_size,
        r.shape.q_len, csv_field(variant_of(r.shape)), dtype_name(r.shape.dtype),
        dtype_name(r.shape.kv_dtype.value_or(r.shape.dtype)), r.shape.causal ? 1 : 0,
        r.plan.tier, r.median_us, r.min_us, r.max_us, r.gbps, r.tflops,
        optional_number(peers.fa2_us, "{:.2f}"), optional_number(peers.fa3_us, "{:.2f}"),
        optional_number(peers.flashmla_us, "{:.2f}"),
        optional_number(ratio(peers.fa2_us, r.median_us), "{:.3f}"),
        optional_number(ratio(peers.fa3_us, r.median_us), "{:.3f}"),
        optional_number(ratio(peers.flashmla_us, r.median_us), "{:.3f}"),
        csv_field(r.spec));
  }
  return csv;
}

Json optional_json(const std::optional<double>& value) { return value ? Json(*value) : Json(); }

// What a shape is, as the JSON of both the results and --dry-run has it.
Json shape_json(const MlaBenchShape& shape) {
  Json row = Json::object();
  row.set("heads", shape.num_heads).set("batch", batch_of(shape));
  row.set("kv_len", shape.ragged_kv_lens.empty() ? Json(shape.kv_len) : Json("ragged"));
  row.set("page", shape.page_size).set("q_len", shape.q_len);
  row.set("variant", variant_of(shape)).set("dtype", dtype_name(shape.dtype));
  row.set("kv_dtype", dtype_name(shape.kv_dtype.value_or(shape.dtype)));
  return row.set("causal", shape.causal);
}

Json results_json(const std::vector<BenchRow>& rows) {
  Json list = Json::array();
  for (const auto& [r, peers] : rows) {
    Json row = shape_json(r.shape);
    row.set("median_us", r.median_us);
    row.set("min_us", r.min_us).set("max_us", r.max_us).set("gbps", r.gbps);
    row.set("tflops", r.tflops).set("fa2_us", optional_json(peers.fa2_us));
    row.set("fa3_us", optional_json(peers.fa3_us));
    row.set("flashmla_us", optional_json(peers.flashmla_us));
    row.set("vs_fa2", optional_json(ratio(peers.fa2_us, r.median_us)));
    row.set("vs_fa3", optional_json(ratio(peers.fa3_us, r.median_us)));
    row.set("vs_flashmla", optional_json(ratio(peers.flashmla_us, r.median_us)));
    row.set("tier", r.plan.tier).set("cluster_size", r.plan.cluster_size);
    row.set("two_launch", r.plan.two_launch).set("spec", r.spec);
    list.push(std::move(row));
  }
  Json report = Json::object();
  return report.set("results", std::move(list));
}

// --dry-run: what would be timed, and against which peer times; no GPU needed.
void print_plan(const std::vector<MlaBenchShape>& shapes, bool json) {
  if (json) {
    Json list = Json::array();
    for (const auto& shape : shapes) {
      const PeerTimings peers = peer_timings_for(shape);
      Json row = shape_json(shape);
      row.set("tier", shape.force_tier).set("fa2_us", optional_json(peers.fa2_us));
      row.set("fa3_us", optional_json(peers.fa3_us));
      list.push(std::move(row.set("flashmla_us", optional_json(peers.flashmla_us))));
    }
    Json report = Json::object();
    std::printf("%s\n", report.set("shapes", std::move(list)).dump().c_str());
    return;
  }
  Table table({"H", "B", "L", "page", "q_len", "variant", "FA2 us", "FA3 us", "FlashMLA us"},
              {true, true, true, true, true, false, true, true, true});
  for (const auto& shape : shapes) {
    const PeerTimings peers = peer_timings_for(shape);
    auto us = [](const std::optional<double>& value) {
      return value ? fmt::format("{:.2f}", *value) : std::string("-");
    };
    table.add_row({std::to_string(shape.num_heads), std::to_string(batch_of(shape)),
                   kv_len_text(shape), std::to_string(shape.page_size),
                   std::to_string(shape.q_len), variant_of(shape), us(peers.fa2_us),
                   us(peers.fa3_us), us(peers.flashmla_us)});
  }
  table.print(stdout);
  std::printf("%zu shapes\n", shapes.size());
}

// The peers were timed on an H200: on any other card a ratio to them would compare two GPUs,
// not two kernels, so there the columns stay empty, saying why.
bool peers_measured_on(const std::string& device_name) {
  if (device_name.find("H200") != std::string::npos) return true;
  std::fprintf(stderr,
               "mlajit bench: the peer timings were measured on an H200 and this device is %s: "
               "no vs FA2/FA3/FlashMLA ratios (time the peers on this card to compare)\n",
               device_name.c_str());
  return false;
}

// --plot without --csv: the CSV goes next to the picture.
std::string csv_path_for(const BenchArgs& args) {
  if (!args.csv.empty() || args.plot.empty()) return args.csv;
  const auto dot = args.plot.rfind('.');
  const auto slash = args.plot.rfind('/');
  const bool has_extension = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  return (has_extension ? args.plot.substr(0, dot) : args.plot) + ".csv";
}

// The default rows a named family cannot run (the forced-tier rows time the portable
// family's smaller tiles) are left out, saying why; an explicit --shape is never left out.
std::vector<MlaBenchShape> runnable_default_rows(const std::vector<MlaBenchShape>& shapes,
                                                 const BenchArgs& args) {
  if (!args.shapes.empty() || args.kernel == MlaOptions{}.kernel) return shapes;
  std::vector<MlaBenchShape> runnable;
  for (const auto& shape : shapes) {
    MlaShape mla;
    mla.num_heads = shape.num_heads;
    mla.page_size = shape.page_size;
    mla.dtype = shape.dtype;
    mla.kv_dtype = shape.kv_dtype;
    mla.kv_scales = shape.kv_scales;
    mla.causal = shape.causal;
    MlaOptions options;
    options.kernel = args.kernel;
    options.force_tier = shape.force_tier;
    try {
      tile_for(args.device, mla, options);
      runnable.push_back(shape);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kUnsupported) throw;
      std::fprintf(stderr, "mlajit bench: H%d B%d L%d %s left out: %s\n", shape.num_heads,
                   shape.batch, shape.kv_len, variant_of(shape).c_str(), e.what());
    }
  }
  return runnable;
}

int run_bench(const BenchArgs& args, const CLI::App& app) {
  const auto asked = bench_shapes(args, app);
  check_kernel_option(args.kernel);
  if (args.dry_run) {
    print_plan(asked, args.json);
    return kExitOk;
  }
  require_gpu("bench", args.device);
  const auto shapes = runnable_default_rows(asked, args);
  MlaBenchOptions options;
  options.kernel = args.kernel;
  options.iterations = args.iterations;
  options.warmup = args.warmup;
  options.device = args.device;
  MlaBench bench(options);
  const bool peers_apply = peers_measured_on(device_summary(args.device).name);
  std::vector<BenchRow> rows;
  for (const auto& shape : shapes) {
    rows.push_back({bench.run(shape), peers_apply ? peer_timings_for(shape) : PeerTimings{}});
    std::fprintf(stderr, "mlajit bench: %s: %.1f us\n", rows.back().result.spec.c_str(),
                 rows.back().result.median_us);
  }
  if (args.json) {
    std::printf("%s\n", results_json(rows).dump().c_str());
  } else {
    print_table(rows);
  }
  const std::string csv = csv_path_for(args);
  if (!csv.empty()) write_text_file(csv, csv_text(rows));
  if (!args.plot.empty()) {
    const std::string problem = write_and_run_roofline_plot(csv, args.plot);
    if (!problem.empty()) std::fprintf(stderr, "mlajit bench: warning: no plot: %s\n", problem.c_str());
  }
  return kExitOk;
}

}  // namespace

Command add_bench_command(CLI::App& parent) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* app = parent.add_subcommand(
      "bench",
      "Time the kernel on the local GPU (median of CUDA-event-timed launches, KV read from HBM) "
      "over the baseline shapes, or the --shape ones, against FlashInfer FA2/FA3/FlashMLA on the "
      "H200; --kv-dtype e4m3 times an FP8 KV cache (half the KV bytes). Exits 1 without a GPU.");
  app->add_option("--shape", args->shapes,
                  "H,B,L,page[,q_len,causal] (heads, batch, kv_len, page size) or "
                  "ragged:H,B,MIN_KV,MAX_KV,SEED, as baseline.md writes them; repeat for several")
      ->allow_extra_args(false);
  app->add_option("--dtype", args->dtype, "bf16 or f16 for every shape")
      ->check(CLI::IsMember({"bf16", "f16"}));
  app->add_option("--kv-dtype", args->kv_dtype,
                  "KV cache dtype for every shape: e4m3 (FP8 with per-tensor scales; GB/s counts "
                  "its 1-byte elements, no peer has a figure); default: the --dtype")
      ->check(CLI::IsMember({"bf16", "f16", "e4m3"}));
  app->add_option("--kv-scales", args->kv_scales,
                  "with --kv-dtype e4m3: tensor (default) or token128, DeepSeek-V3.2's cache of "
                  "656-byte token rows (512 codes, a float32 scale per 128 of them, 64 bf16 kpe "
                  "values; GB/s counts the 656 bytes)")
      ->check(CLI::IsMember({"tensor", "token128"}));
  app->add_flag("--causal", args->causal, "causal mask for every shape");
  app->add_option("--qlen", args->q_len, "queries per request (speculative decode)")
      ->check(CLI::Range(1, 64));
  app->add_option("--tier", args->tier, "force tile tier 1..3 (debug)")->check(CLI::Range(1, 3));
  app->add_flag("--batch-invariant", args->batch_invariant,
                "plan every shape batch-invariantly (MlaOptions::batch_invariant: each request's "
                "KV cut at multiples of 2048 tokens from its own start), to see what it costs");
  app->add_flag("--two-launch", args->two_launch,
                "merge split tiles in a second launch instead of behind a grid barrier "
                "(MlaOptions::force_two_launch), to compare the two paths");
  app->add_flag("--contiguous-pages", args->contiguous_pages,
                "each launch's pages in pool order (a fresh cache's layout) instead of a random "
                "permutation's: what the DRAM's locality costs against what the kernel's page "
                "handling costs");
  app->add_option("--iterations", args->iterations, "timed launches per shape (median reported)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app->add_option("--warmup", args->warmup, "untimed launches first")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  app->add_option("--device", args->device, "CUDA device ordinal")->check(CLI::NonNegativeNumber);
  app->add_option("--kernel", args->kernel,
                  "kernel family to time ('auto': the one each shape gets on the device)")
      ->capture_default_str();
  app->add_option("--csv", args->csv, "also write the results as CSV to FILE");
  app->add_option("--plot", args->plot,
                  "roofline-style PNG (GB/s vs TFLOP/s against 4530 GB/s and 772 TFLOP/s), drawn "
                  "by a python3+matplotlib script written next to it");
  app->add_flag("--json", args->json, "print the results as JSON on stdout");
  app->add_flag("--dry-run", args->dry_run,
                "print the shapes and the peer times they are compared with, without a GPU");
  return {app, [args, app] { return run_bench(*args, *app); }};
}

}  // namespace mlajit::cli
