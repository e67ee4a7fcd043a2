#include "cache_listing.h"

#include <sstream>

namespace mlajit::cli {

jit::CacheOptions cache_options_for(const std::string& cache_dir) {
  jit::CacheOptions options = jit::CacheOptions::from_environment();
  if (!cache_dir.empty()) {
    options.read_only_dirs.clear();
    options.user_dir = cache_dir;
  }
  return options;
}

std::string spec_of_key_text(const std::string& key_text) {
  std::istringstream lines(key_text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("spec=", 0) == 0) return line.substr(5);
  }
  return "";
}

std::string arch_of_spec_text(const std::string& spec_text) {
  std::istringstream fields(spec_text);
  for (std::string field; std::getline(fields, field, ';');) {
    if (field.rfind("arch=", 0) == 0) return field.substr(5);
  }
  return "";
}

Json listing_json(const jit::CacheListing& listing) {
  const std::string spec = spec_of_key_text(listing.key_text);
  Json entry = Json::object();
  entry.set("spec", spec).set("arch", arch_of_spec_text(spec));
  entry.set("bytes", listing.bytes).set("last_use_unix", listing.last_use_unix);
  entry.set("layer", listing.layer).set("dir", listing.dir).set("path", listing.path);
  entry.set("verifies", listing.verifies);
  if (!listing.problem.empty()) entry.set("problem", listing.problem);
  return entry;
}

Table listing_table(const std::vector<jit::CacheListing>& listings) {
  Table table({"spec", "arch", "size", "last use", "layer", "verifies"},
              {false, false, true, false, false, false});
  for (const auto& listing : listings) {
    const std::string spec = spec_of_key_text(listing.key_text);
    table.add_row({spec.empty() ? "(unreadable) " + listing.path : spec, arch_of_spec_text(spec),
                   human_bytes(listing.bytes), format_unix_time(listing.last_use_unix),
                   listing.layer, listing.verifies ? "yes" : "NO: " + listing.problem});
  }
  return table;
}

}  // namespace mlajit::cli
