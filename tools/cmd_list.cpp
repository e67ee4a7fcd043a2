// `mlajit list`: every entry of every cache layer, with its spec and whether it verifies.
#include <algorithm>
#include <memory>

#include "cache_listing.h"
#include "commands.h"

namespace mlajit::cli {
namespace {

struct ListArgs {
  bool json = false;
  std::string cache_dir;
};

int run_list(const ListArgs& args) {
  KernelCache cache(cache_settings_for(args.cache_dir));
  std::vector<CacheEntryInfo> listings = cache.list();
  std::stable_sort(listings.begin(), listings.end(),
                   [](const auto& a, const auto& b) { return a.spec_text < b.spec_text; });
  uint64_t bytes = 0;
  size_t bad = 0;
  for (const auto& listing : listings) {
    bytes += listing.bytes;
    bad += !listing.verifies;
  }
  if (args.json) {
    Json entries = Json::array();
    for (const auto& listing : listings) entries.push(listing_json(listing));
    Json report = Json::object();
    report.set("count", listings.size()).set("bytes", bytes).set("not_verifying", bad);
    report.set("entries", std::move(entries));
    std::printf("%s\n", report.dump().c_str());
    return kExitOk;
  }
  if (!listings.empty()) listing_table(listings).print(stdout);
  std::printf("%zu entries, %s%s\n", listings.size(), human_bytes(bytes).c_str(),
              bad ? (", " + std::to_string(bad) + " do not verify").c_str() : "");
  return kExitOk;
}

}  // namespace

Command add_list_command(CLI::App& parent) {
  auto args = std::make_shared<ListArgs>();
  CLI::App* app = parent.add_subcommand(
      "list",
      "List the entries of every cache layer (shipped MLAJIT_CACHE_PATH dirs, then the user "
      "cache): spec, arch, size, last use, layer, and whether the entry verifies.");
  app->add_flag("--json", args->json, "print the listing as JSON on stdout");
  app->add_option("--cache-dir", args->cache_dir,
                  "list this cache directory only, instead of the layers from the environment");
  return {app, [args] { return run_list(*args); }};
}

}  // namespace mlajit::cli
