#pragma once
// Where things live inside a cache directory:
//   <dir>/<hex[0:2]>/<hex>.cubin          entries, sharded by the first two hex digits so no
//                                          directory grows to tens of thousands of files
//   <dir>/<hex[0:2]>/.<hex>.cubin.tmp.*   in-flight (or abandoned) writes, never read
//   <dir>/locks/<hex>.lock                per-key flock files (user layer only; never deleted,
//                                          since unlinking a lock file others may hold would
//                                          let two processes "hold" the same key)
//   <dir>/quarantine/<hex>.<unix-ns>      entries that failed verification, kept for inspection
#include <cstdint>
#include <string>
#include <vector>

namespace mlajit::jit {

std::string entry_path(const std::string& dir, const std::string& hex);
std::string lock_dir(const std::string& dir);
std::string lock_path(const std::string& dir, const std::string& hex);
std::string quarantine_dir(const std::string& dir);

struct EntryFile {
  std::string path;
  std::string hex;       // from the file name
  uint64_t bytes = 0;
  int64_t mtime_ns = 0;  // last use
};

// Every <hex>.cubin under the shard directories of `dir`; temp files, locks and quarantine
// are skipped. A missing or unreadable dir yields nothing.
std::vector<EntryFile> scan_entry_files(const std::string& dir);

// The ".<hex>.cubin.tmp.*" files under the shard directories of `dir`: writes in flight, or
// left behind by a process that died mid-write.
std::vector<EntryFile> scan_temp_files(const std::string& dir);

}  // namespace mlajit::jit
