#pragma once
// What list, prune and info share about cache entries: which cache to open, and how an
// entry reads as a table row or a JSON object.
#include <string>
#include <vector>

#include "cli_support.h"
#include "jit/disk_cache.h"
#include "json_writer.h"

namespace mlajit::cli {

// The environment's cache options, or only `cache_dir` (as the writable layer) when given.
jit::CacheOptions cache_options_for(const std::string& cache_dir);

// The spec text recorded in a cache key text (its "spec=" line), "" when absent.
std::string spec_of_key_text(const std::string& key_text);
// The "arch=" field of a spec text, "" when absent.
std::string arch_of_spec_text(const std::string& spec_text);

Json listing_json(const jit::CacheListing& listing);
// Columns: spec, arch, size, last use, layer, verifies.
Table listing_table(const std::vector<jit::CacheListing>& listings);

}  // namespace mlajit::cli
