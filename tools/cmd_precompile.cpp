// `mlajit precompile`: builds the fleet matrix of kernel specs (every kernel family's rows, or
// one family's with --kernel) into a cache directory, in parallel, skipping entries that are
// already there.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "cli_support.h"
#include "commands.h"
#include "json_writer.h"
#include "mlajit/error.h"
#include "mlajit/fleet.h"
#include "mlajit/kernel_cache.h"
#include "mlajit/runtime.h"
#include "progress.h"

namespace mlajit::cli {
namespace {

struct PrecompileArgs {
  std::string kernel = "auto";
  std::vector<std::string> archs{"all"};
  std::vector<std::string> dtypes;     // empty: every family row's
  std::vector<std::string> kv_dtypes;  // empty: every family row's
  std::vector<std::string> head_dims;  // empty: every family row's
  std::string profile;
  bool all_tiers = false;
  int jobs = 0;
  std::string out;
  bool json = false;
  bool quiet = false;
  bool dry_run = false;
};

struct Outcome {
  std::string status = "pending";  // "compiled", "cached", "failed"
  uint64_t bytes = 0;
  double seconds = 0;
  std::string key;
  std::string error;
};

// "SMEM_PER_SM" or "SMEM_PER_SM/SMEM_PER_BLOCK", each a size (233472, 228K), into `options`.
void parse_profile(const std::string& text, FleetOptions* options) {
  const auto parts = split_list(text, '/');
  if (parts.empty() || parts.size() > 2) {
    throw UsageError(fmt::format(
        "--profile '{}' is not SMEM_PER_SM[/SMEM_PER_BLOCK] (e.g. 233472 or 228K/227K)", text));
  }
  const uint64_t per_sm = parse_size(parts[0]);
  const uint64_t per_block = parts.size() == 2 ? parse_size(parts[1]) : per_sm;
  if (per_sm == 0 || per_block == 0 || per_sm > (1u << 30) || per_block > (1u << 30)) {
    throw UsageError(fmt::format("--profile '{}': shared memory sizes must be in 1..1G bytes", text));
  }
  options->smem_per_sm = static_cast<int>(per_sm);
  options->smem_per_block_optin = static_cast<int>(per_block);
}

// The matrix options; a head-dims pair no family computes is a usage error (the library
// rejects it while building the matrix, see run_precompile).
FleetOptions matrix_options(const PrecompileArgs& args) {
  FleetOptions options;
  check_kernel_option(args.kernel);
  options.kernel = args.kernel;
  const bool all_archs = std::find(args.archs.begin(), args.archs.end(), "all") != args.archs.end();
  if (!all_archs) options.archs = args.archs;
  as_usage("--dtype", [&] {
    for (const auto& dtype : args.dtypes) options.dtypes.push_back(parse_dtype(dtype));
  });
  as_usage("--kv-dtype", [&] {
    for (const auto& dtype : args.kv_dtypes) options.kv_dtypes.push_back(parse_dtype(dtype));
  });
  options.head_dims = args.head_dims;
  if (!args.profile.empty()) parse_profile(args.profile, &options);
  options.all_tiers = args.all_tiers;
  return options;
}

KernelCache precompile_cache(const std::string& out) {
  if (out.empty()) return KernelCache(CacheSettings::from_environment());
  std::error_code error;
  std::filesystem::create_directories(out, error);
  if (error) {
    throw Error(ErrorCode::kIoError,
                fmt::format("--out: cannot create directory '{}': {}", out, error.message()));
  }
  // A fresh layer of its own: entries of the user or shipped caches must not count as "cached"
  // here, since this directory is what gets shipped.
  CacheSettings settings;
  settings.user_dir = out;
  KernelCache cache(settings);
  if (!cache.user_dir_writable()) {
    // The cache would keep the kernels in memory only: nothing would reach the directory.
    throw Error(ErrorCode::kIoError, fmt::format("--out: directory '{}' is not writable", out));
  }
  return cache;
}

Outcome compile_one(KernelCache& cache, const KernelSpec& spec) {
  Outcome outcome;
  const auto start = std::chrono::steady_clock::now();
  try {
    const PrecompileResult result = cache.precompile(spec);
    outcome.status = result.from_cache ? "cached" : "compiled";
    outcome.bytes = result.bytes;
    outcome.key = result.key;
  } catch (const Error& e) {
    outcome.status = "failed";
    outcome.error = fmt::format("{}: {}", error_code_name(e.code()), e.what());
  } catch (const std::exception& e) {
    outcome.status = "failed";
    outcome.error = e.what();
  }
  outcome.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return outcome;
}

// A pool of `jobs` threads taking specs in matrix order; KernelCache::precompile is safe to
// call concurrently (one build per key).
std::vector<Outcome> compile_all(KernelCache& cache, const std::vector<FleetSpec>& specs, int jobs,
                                 Progress& progress) {
  std::vector<Outcome> outcomes(specs.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < specs.size(); i = next++) {
      outcomes[i] = compile_one(cache, specs[i].spec);
      progress.item_done(outcomes[i].status == "failed" ? "FAILED" : outcomes[i].status,
                         specs[i].spec.text());
    }
  };
  const size_t threads = std::min<size_t>(std::max(jobs, 1), specs.size());
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& thread : pool) thread.join();
  progress.finish();
  return outcomes;
}

struct Summary {
  size_t compiled = 0, cached = 0, failed = 0;
  uint64_t bytes = 0;
};

Summary summarize(const std::vector<Outcome>& outcomes) {
  Summary summary;
  for (const auto& outcome : outcomes) {
    summary.compiled += outcome.status == "compiled";
    summary.cached += outcome.status == "cached";
    summary.failed += outcome.status == "failed";
    summary.bytes += outcome.bytes;
  }
  return summary;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

void print_text(const std::vector<FleetSpec>& specs, const std::vector<Outcome>& outcomes,
                const Summary& summary, double wall, const std::string& dir) {
  bool first_failure = true;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (outcomes[i].status != "failed") continue;
    // The first failure in full (it carries the NVRTC log), the rest by their first line.
    std::printf("FAILED %s\n  %s\n", specs[i].spec.text().c_str(),
                first_failure ? outcomes[i].error.c_str() : first_line(outcomes[i].error).c_str());
    first_failure = false;
  }
  Table table({"specs", "compiled", "cached", "failed", "bytes", "wall time"},
              {true, true, true, true, true, true});
  table.add_row({std::to_string(specs.size()), std::to_string(summary.compiled),
                 std::to_string(summary.cached), std::to_string(summary.failed),
                 human_bytes(summary.bytes), human_seconds(wall)});
  table.print(stdout);
  if (!dir.empty()) std::printf("cache directory: %s\n", dir.c_str());
}

Json json_report(const std::vector<FleetSpec>& specs, const std::vector<Outcome>& outcomes,
                 const Summary& summary, double wall, const std::string& dir, int jobs) {
  Json entries = Json::array();
  for (size_t i = 0; i < specs.size(); ++i) {
    Json entry = Json::object();
    entry.set("spec", specs[i].spec.text()).set("arch", specs[i].spec.arch);
    entry.set("family", specs[i].spec.family).set("tier", specs[i].tier);
    entry.set("status", outcomes[i].status);
    entry.set("bytes", outcomes[i].bytes).set("seconds", outcomes[i].seconds);
    if (!outcomes[i].key.empty()) entry.set("key", outcomes[i].key);
    if (!outcomes[i].error.empty()) entry.set("error", outcomes[i].error);
    entries.push(std::move(entry));
  }
  Json report = Json::object();
  report.set("specs", specs.size()).set("compiled", summary.compiled);
  report.set("cached", summary.cached).set("failed", summary.failed);
  report.set("bytes", summary.bytes).set("wall_seconds", wall).set("jobs", jobs);
  report.set("cache_dir", dir).set("entries", std::move(entries));
  return report;
}

void print_matrix(const std::vector<FleetSpec>& specs, bool json) {
  if (json) {
    Json list = Json::array();
    for (const auto& entry : specs) list.push(entry.spec.text());
    Json report = Json::object();
    report.set("specs", specs.size()).set("matrix", std::move(list));
    std::printf("%s\n", report.dump().c_str());
    return;
  }
  for (const auto& entry : specs) std::printf("%s\n", entry.spec.text().c_str());
  std::printf("%zu specs\n", specs.size());
}

int run_precompile(const PrecompileArgs& args) {
  const std::vector<FleetSpec> specs = [&] {
    std::vector<FleetSpec> built;
    const auto options = matrix_options(args);
    as_usage("precompile matrix", [&] { built = fleet_matrix(options); });
    return built;
  }();
  if (args.dry_run) {
    print_matrix(specs, args.json);
    return kExitOk;
  }
  const int jobs = args.jobs > 0 ? args.jobs : std::max(1u, std::thread::hardware_concurrency());
  const CompilerInfo compiler = compiler_info();
  if (!compiler.available) {
    std::fprintf(stderr, "mlajit precompile: warning: NVRTC unavailable (%s); only entries "
                 "already cached can be served\n", compiler.unavailable_reason.c_str());
  }
  KernelCache cache = precompile_cache(args.out);
  const std::string dir = cache.settings().user_dir;
  Progress progress(specs.size(), !args.quiet);
  const auto outcomes = compile_all(cache, specs, jobs, progress);
  const double wall = progress.elapsed_seconds();
  const Summary summary = summarize(outcomes);
  if (args.json) {
    std::printf("%s\n", json_report(specs, outcomes, summary, wall, dir, jobs).dump().c_str());
  } else {
    print_text(specs, outcomes, summary, wall, dir);
  }
  return summary.failed == 0 ? kExitOk : kExitFailure;
}

// "bf16,f16" / "512/64,256/32": what the families' rows hold (on every arch), for the help
// text.
std::string row_values(const std::function<std::string(const KernelSpec&)>& value) {
  std::vector<std::string> values;
  for (const FleetSpec& entry : fleet_matrix()) {
    const std::string text = value(entry.spec);
    if (std::find(values.begin(), values.end(), text) == values.end()) values.push_back(text);
  }
  return fmt::format("{}", fmt::join(values, ","));
}

}  // namespace

Command add_precompile_command(CLI::App& parent) {
  auto args = std::make_shared<PrecompileArgs>();
  CLI::App* app = parent.add_subcommand(
      "precompile",
      "Compile the matrix of kernel specs (arch x kernel family x the family's rows of dtype "
      "and head dims; one spec serves causal and not) into a cache directory, so that GPUs of "
      "those archs start without compiling. Entries already present are skipped. Exits 1 when "
      "any spec fails to compile, or when the family asked for cannot build an asked row "
      "(saying why).");
  app->add_option("--kernel", args->kernel,
                  "kernel family whose rows to build, or 'auto' for every family's")
      ->capture_default_str();
  app->add_option("--arch", args->archs,
                  "target archs, comma-separated (sm_80,sm_90,...), or 'all' for every profiled "
                  "arch")
      ->delimiter(',')
      ->capture_default_str();
  app->add_option("--dtype", args->dtypes,
                  "only rows of these dtypes of q and out (default: every row's: " +
                      row_values([](const KernelSpec& s) { return std::string(dtype_name(s.q_dtype)); }) +
                      ")")
      ->delimiter(',');
  app->add_option("--kv-dtype", args->kv_dtypes,
                  "only rows of these KV-cache dtypes (default: every row's: " +
                      row_values([](const KernelSpec& s) { return std::string(dtype_name(s.kv_dtype)); }) +
                      ")")
      ->delimiter(',');
  app->add_option("--head-dims", args->head_dims,
                  "only rows of these CKV/KPE head-dim pairs (default: every row's: " +
                      row_values([](const KernelSpec& s) {
                        return fmt::format("{}/{}", s.head_dim_ckv, s.head_dim_kpe);
                      }) +
                      ")")
      ->delimiter(',');
  app->add_option("--profile", args->profile,
                  "SMEM_PER_SM[/SMEM_PER_BLOCK]: shared-memory limits (bytes, or 228K) used for "
                  "every arch instead of its device profile");
  app->add_flag("--all-tiers", args->all_tiers,
                "also build every tile tier that fits, so a forced tier (debug) is cached too");
  app->add_option("-j,--jobs", args->jobs, "parallel compiles (default: hardware threads)")
      ->check(CLI::Range(1, 1024));
  app->add_option("--out", args->out,
                  "write into this cache directory only (created if missing), to ship via "
                  "MLAJIT_CACHE_PATH; default: the user cache");
  app->add_flag("--json", args->json, "print the report as JSON on stdout");
  app->add_flag("-q,--quiet", args->quiet, "no progress lines on stderr");
  app->add_flag("--dry-run", args->dry_run, "print the matrix of specs without compiling");
  return {app, [args] { return run_precompile(*args); }};
}

}  // namespace mlajit::cli
