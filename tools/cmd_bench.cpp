// `mlajit bench`: times the kernel on the local GPU over the baseline shapes (or given ones)
// and compares with the FlashInfer FA2 / FA3 / FlashMLA numbers measured on the H200.
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "attention/mla_bench.h"
#include "cli_support.h"
#include "commands.h"
#include "json_writer.h"
#include "mlajit/error.h"
#include "mlajit/runtime.h"
#include "roofline_plot.h"

namespace mlajit::cli {
namespace {

struct BenchArgs {
  std::vector<std::string> shapes;  // "H,B,L,page"
  std::string dtype;
  bool causal = false;
  int q_len = 0;
  int tier = 0;
  int iterations = 30;
  int warmup = 5;
  int device = 0;
  std::string kernel = "auto";
  std::string csv;
  std::string plot;
  bool json = false;
};

MlaBenchShape parse_shape(const std::string& text) {
  const auto parts = split_list(text, ',');
  std::vector<int> values;
  for (const auto& part : parts) {
    try {
      size_t used = 0;
      values.push_back(std::stoi(part, &used));
      if (used != part.size()) values.back() = -1;
    } catch (const std::exception&) {
      values.push_back(-1);
    }
  }
  const bool ok = values.size() == 4 && values[0] >= 1 && values[0] <= 128 && values[1] >= 1 &&
                  values[2] >= 0 && values[3] >= 1;
  if (!ok) {
    throw UsageError(fmt::format(
        "--shape '{}' is not H,B,L,page with heads 1..128, batch >= 1, kv_len >= 0, page >= 1 "
        "(e.g. 128,64,4096,64)",
        text));
  }
  MlaBenchShape shape;
  shape.num_heads = values[0];
  shape.batch = values[1];
  shape.kv_len = values[2];
  shape.page_size = values[3];
  return shape;
}

// Explicit shapes, else the baseline ones; the modifiers given on the line apply to all.
std::vector<MlaBenchShape> bench_shapes(const BenchArgs& args, const CLI::App& app) {
  std::vector<MlaBenchShape> shapes;
  for (const auto& text : args.shapes) shapes.push_back(parse_shape(text));
  if (shapes.empty()) shapes = baseline_bench_shapes();
  for (auto& shape : shapes) {
    if (app.count("--dtype")) as_usage("--dtype", [&] { shape.dtype = parse_dtype(args.dtype); });
    if (app.count("--causal")) shape.causal = args.causal;
    if (app.count("--qlen")) shape.q_len = args.q_len;
    if (app.count("--tier")) shape.force_tier = args.tier;
  }
  return shapes;
}

std::string variant_of(const MlaBenchShape& shape) {
  if (!shape.label.empty()) return shape.label;
  std::string variant;
  auto add = [&](const std::string& word) { variant += (variant.empty() ? "" : " ") + word; };
  if (shape.dtype == DType::kFloat16) add("fp16");
  if (shape.causal) add("causal");
  if (shape.force_tier) add("tier" + std::to_string(shape.force_tier));
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

void print_table(const std::vector<MlaBenchResult>& results) {
  Table table({"H", "B", "L", "page", "q_len", "variant", "us", "GB/s", "TF/s", "vs FA2", "vs FA3",
               "vs FlashMLA"},
              {true, true, true, true, true, false, true, true, true, true, true, true});
  for (const auto& r : results) {
    table.add_row({std::to_string(r.shape.num_heads), std::to_string(batch_of(r.shape)),
                   kv_len_text(r.shape), std::to_string(r.shape.page_size),
                   std::to_string(r.shape.q_len), variant_of(r.shape),
                   fmt::format("{:.1f}", r.median_us), fmt::format("{:.0f}", r.gbps),
                   fmt::format("{:.1f}", r.tflops),
                   ratio_text(ratio(r.reference_fa2_us, r.median_us)),
                   ratio_text(ratio(r.reference_fa3_us, r.median_us)),
                   ratio_text(ratio(r.reference_flashmla_us, r.median_us))});
  }
  table.print(stdout);
  std::printf("vs X = X's time / ours (above 1: we are faster); references: FlashInfer on the "
              "H200, shared/perf/baseline.md\n");
}

// RFC 4180: a field holding a comma, quote or newline is quoted, quotes doubled. The ragged
// shape's label ("ragged U[1,8192]") has a comma.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string csv_text(const std::vector<MlaBenchResult>& results) {
  std::string csv =
      "heads,batch,kv_len,page,q_len,variant,dtype,causal,tier,median_us,min_us,max_us,gbps,"
      "tflops,fa2_us,fa3_us,flashmla_us,vs_fa2,vs_fa3,vs_flashmla,spec\n";
  for (const auto& r : results) {
    csv += fmt::format(
        "{},{},{},{},{},{},{},{},{},{:.3f},{:.3f},{:.3f},{:.1f},{:.3f},{},{},{},{},{},{},{}\n",
        r.shape.num_heads, batch_of(r.shape), kv_len_text(r.shape), r.shape.page_size,
        r.shape.q_len, csv_field(variant_of(r.shape)), dtype_name(r.shape.dtype), r.shape.causal ? 1 : 0,
        r.plan.tier, r.median_us, r.min_us, r.max_us, r.gbps, r.tflops,
        optional_number(r.reference_fa2_us, "{:.1f}"), optional_number(r.reference_fa3_us, "{:.1f}"),
        optional_number(r.reference_flashmla_us, "{:.1f}"),
        optional_number(ratio(r.reference_fa2_us, r.median_us), "{:.3f}"),
        optional_number(ratio(r.reference_fa3_us, r.median_us), "{:.3f}"),
        optional_number(ratio(r.reference_flashmla_us, r.median_us), "{:.3f}"),
        csv_field(r.spec));
  }
  return csv;
}

Json optional_json(const std::optional<double>& value) { return value ? Json(*value) : Json(); }

Json results_json(const std::vector<MlaBenchResult>& results) {
  Json rows = Json::array();
  for (const auto& r : results) {
    Json row = Json::object();
    row.set("heads", r.shape.num_heads).set("batch", batch_of(r.shape));
    row.set("kv_len", r.shape.ragged_kv_lens.empty() ? Json(r.shape.kv_len) : Json("ragged"));
    row.set("page", r.shape.page_size).set("q_len", r.shape.q_len);
    row.set("variant", variant_of(r.shape)).set("dtype", dtype_name(r.shape.dtype));
    row.set("causal", r.shape.causal).set("median_us", r.median_us);
    row.set("min_us", r.min_us).set("max_us", r.max_us).set("gbps", r.gbps);
    row.set("tflops", r.tflops).set("fa2_us", optional_json(r.reference_fa2_us));
    row.set("fa3_us", optional_json(r.reference_fa3_us));
    row.set("flashmla_us", optional_json(r.reference_flashmla_us));
    row.set("vs_fa2", optional_json(ratio(r.reference_fa2_us, r.median_us)));
    row.set("vs_fa3", optional_json(ratio(r.reference_fa3_us, r.median_us)));
    row.set("vs_flashmla", optional_json(ratio(r.reference_flashmla_us, r.median_us)));
    row.set("tier", r.plan.tier).set("cluster_size", r.plan.cluster_size);
    row.set("two_launch", r.plan.two_launch).set("registers", r.registers).set("spec", r.spec);
    rows.push(std::move(row));
  }
  Json report = Json::object();
  return report.set("results", std::move(rows));
}

// --plot without --csv: the CSV goes next to the picture.
std::string csv_path_for(const BenchArgs& args) {
  if (!args.csv.empty() || args.plot.empty()) return args.csv;
  const auto dot = args.plot.rfind('.');
  const auto slash = args.plot.rfind('/');
  const bool has_extension = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  return (has_extension ? args.plot.substr(0, dot) : args.plot) + ".csv";
}

// The baseline's rows a named family cannot run (the forced-tier rows time the portable
// family's smaller tiles) are left out, saying why; an explicit --shape is never left out.
std::vector<MlaBenchShape> runnable_baseline_rows(const std::vector<MlaBenchShape>& shapes,
                                                  const BenchArgs& args) {
  if (!args.shapes.empty() || args.kernel == MlaOptions{}.kernel) return shapes;
  std::vector<MlaBenchShape> runnable;
  for (const auto& shape : shapes) {
    MlaShape mla;
    mla.num_heads = shape.num_heads;
    mla.page_size = shape.page_size;
    mla.dtype = shape.dtype;
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
  require_gpu("bench", args.device);
  const auto shapes = runnable_baseline_rows(asked, args);
  MlaBenchOptions options;
  options.kernel = args.kernel;
  options.iterations = args.iterations;
  options.warmup = args.warmup;
  options.device = args.device;
  const auto results = run_mla_bench(shapes, options);
  if (args.json) {
    std::printf("%s\n", results_json(results).dump().c_str());
  } else {
    print_table(results);
  }
  const std::string csv = csv_path_for(args);
  if (!csv.empty()) write_text_file(csv, csv_text(results));
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
      "H200. Exits 1 without a GPU.");
  app->add_option("--shape", args->shapes,
                  "H,B,L,page (heads, batch, kv_len, page size); repeat for several")
      ->allow_extra_args(false);
  app->add_option("--dtype", args->dtype, "bf16 or f16 for every shape")
      ->check(CLI::IsMember({"bf16", "f16"}));
  app->add_flag("--causal", args->causal, "causal mask for every shape");
  app->add_option("--qlen", args->q_len, "queries per request (speculative decode)")
      ->check(CLI::Range(1, 64));
  app->add_option("--tier", args->tier, "force tile tier 1..3 (debug)")->check(CLI::Range(1, 3));
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
  return {app, [args, app] { return run_bench(*args, *app); }};
}

}  // namespace mlajit::cli
