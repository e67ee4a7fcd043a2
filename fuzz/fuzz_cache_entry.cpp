// libFuzzer target: the cache-entry parser (decode_cache_entry), which reads files that any
// process, crash or disk fault may have left in a cache directory.
// Must never crash, read out of bounds, allocate more than the input justifies, or accept
// bytes that are not exactly a valid entry: whatever it accepts, encode_cache_entry must
// reproduce byte for byte (the format has one encoding per entry).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "jit/disk_cache.h"

using mlajit::jit::CacheEntry;

namespace {

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "fuzz_cache_entry: invariant violated: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> bytes(data, data + size);
  std::string problem;
  const auto entry = mlajit::jit::decode_cache_entry(bytes, "", &problem);
  if (!entry) {
    if (problem.empty()) violated("a refused entry must say why");
    return 0;
  }
  if (!problem.empty()) violated("an accepted entry must leave problem empty");
  if (mlajit::jit::encode_cache_entry(*entry) != bytes) violated("accepted bytes are not canonical");
  // With the key it holds it is accepted again; with any other key it is refused.
  if (!mlajit::jit::decode_cache_entry(bytes, entry->key_text, &problem)) {
    // An empty key text means "any key": nothing more to check then.
    if (!entry->key_text.empty()) violated("refused with its own key");
  }
  if (mlajit::jit::decode_cache_entry(bytes, entry->key_text + "x", &problem)) {
    violated("accepted with another key");
  }
  return 0;
}
