#include "cache_listing.h"

#include <sstream>

namespace mlajit::cli {

CacheSettings cache_settings_for(const std::string& cache_dir) {
  CacheSettings settings = CacheSettings::from_environment();
  if (!cache_dir.empty()) {
    settings.read_only_dirs.clear();
    settings.user_dir = cache_dir;
  }
  return settings;
}

std::string arch_of_spec_text(const std::string& spec_text) {
  std::istringstream fields(spec_text);
  for (std::string field; std::getline(fields, field, ';');) {
    if (field.rfind("arch=", 0) == 0) return field.substr(5);
  }
  return "";
}

Json listing_json(const CacheEntryInfo& entry) {
  Json json = Json::object();
  json.set("spec", entry.spec_text).set("arch", arch_of_spec_text(entry.spec_text));
  json.set("bytes", entry.bytes).set("last_use_unix", entry.last_use_unix);
  json.set("layer", entry.layer).set("dir", entry.dir).set("path", entry.path);
  json.set("verifies", entry.verifies);
  if (!entry.problem.empty()) json.set("problem", entry.problem);
  return json;
}

Table listing_table(const std::vector<CacheEntryInfo>& entries) {
  Table table({"spec", "arch", "size", "last use", "layer", "verifies"},
              {false, false, true, false, false, false});
  for (const auto& entry : entries) {
    const std::string& spec = entry.spec_text;
    table.add_row({spec.empty() ? "(unreadable) " + entry.path : spec, arch_of_spec_text(spec),
                   human_bytes(entry.bytes), format_unix_time(entry.last_use_unix),
                   entry.layer, entry.verifies ? "yes" : "NO: " + entry.problem});
  }
  return table;
}

}  // namespace mlajit::cli
