#pragma once
// What list, prune and info share about cache entries: which cache to open, and how an
// entry reads as a table row or a JSON object.
#include <string>
#include <vector>

#include "cli_support.h"
#include "json_writer.h"
#include "mlajit/kernel_cache.h"

namespace mlajit::cli {

// The environment's cache settings, or only `cache_dir` (as the writable layer) when given.
CacheSettings cache_settings_for(const std::string& cache_dir);

// The "arch=" field of a spec text, "" when absent.
std::string arch_of_spec_text(const std::string& spec_text);

Json listing_json(const CacheEntryInfo& entry);
// Columns: spec, arch, size, last use, layer, verifies.
Table listing_table(const std::vector<CacheEntryInfo>& entries);

}  // namespace mlajit::cli
