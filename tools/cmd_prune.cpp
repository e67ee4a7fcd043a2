// `mlajit prune`: shrinks the user cache to a size budget, least recently used first.
#include <chrono>
#include <memory>
#include <optional>

#include "cache_listing.h"
#include "commands.h"
#include "mlajit/error.h"

namespace mlajit::cli {
namespace {

struct PruneArgs {
  std::string max_size;
  std::string older_than;
  std::string cache_dir;
  bool json = false;
};

uint64_t user_layer_bytes(const KernelCache& cache) {
  uint64_t bytes = 0;
  for (const auto& listing : cache.list()) {
    if (listing.layer == "user") bytes += listing.bytes;
  }
  return bytes;
}

int run_prune(const PruneArgs& args) {
  const uint64_t max_bytes = parse_size(args.max_size);
  std::optional<std::chrono::seconds> older_than;
  if (!args.older_than.empty()) older_than = parse_duration(args.older_than);
  KernelCache cache(cache_settings_for(args.cache_dir));
  if (cache.settings().user_dir.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                "no user cache directory to prune (set MLAJIT_CACHE_DIR or pass --cache-dir)");
  }
  const auto removed = cache.prune(max_bytes, older_than);
  uint64_t removed_bytes = 0;
  for (const auto& listing : removed) removed_bytes += listing.bytes;
  const uint64_t remaining = user_layer_bytes(cache);
  if (args.json) {
    Json entries = Json::array();
    for (const auto& listing : removed) entries.push(listing_json(listing));
    Json report = Json::object();
    report.set("dir", cache.settings().user_dir).set("max_bytes", max_bytes);
    if (older_than) report.set("older_than_seconds", older_than->count());
    report.set("removed_count", removed.size()).set("removed_bytes", removed_bytes);
    report.set("remaining_bytes", remaining).set("removed", std::move(entries));
    std::printf("%s\n", report.dump().c_str());
    return kExitOk;
  }
  if (!removed.empty()) listing_table(removed).print(stdout);
  std::printf("removed %zu entries (%s) from %s; %s remain (budget %s)\n", removed.size(),
              human_bytes(removed_bytes).c_str(), cache.settings().user_dir.c_str(),
              human_bytes(remaining).c_str(), human_bytes(max_bytes).c_str());
  return kExitOk;
}

}  // namespace

Command add_prune_command(CLI::App& parent) {
  auto args = std::make_shared<PruneArgs>();
  CLI::App* app = parent.add_subcommand(
      "prune",
      "Remove least-recently-used entries of the user cache until it holds at most --max-size "
      "(and every entry last used longer ago than --older-than). Shipped layers are never "
      "touched.");
  app->add_option("--max-size", args->max_size, "size budget: bytes, or with a unit (500M, 2G)")
      ->required()
      ->check(CLI::Validator(
          [](std::string& text) {
            try {
              parse_size(text);
              return std::string();
            } catch (const UsageError& e) {
              return std::string(e.what());
            }
          },
          "SIZE"));
  app->add_option("--older-than", args->older_than,
                  "also remove entries last used longer ago than this (7d, 12h, 30m)")
      ->check(CLI::Validator(
          [](std::string& text) {
            try {
              parse_duration(text);
              return std::string();
            } catch (const UsageError& e) {
              return std::string(e.what());
            }
          },
          "DURATION"));
  app->add_option("--cache-dir", args->cache_dir,
                  "prune this cache directory instead of the user cache from the environment");
  app->add_flag("--json", args->json, "print what was removed as JSON on stdout");
  return {app, [args] { return run_prune(*args); }};
}

}  // namespace mlajit::cli
