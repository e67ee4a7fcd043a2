#include "jit/cache_layout.h"

#include <dirent.h>
#include <sys/stat.h>

#include <memory>

namespace mlajit::jit {
namespace {

bool is_hex(const std::string& s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return !s.empty();
}

std::vector<std::string> directory_names(const std::string& dir) {
  std::vector<std::string> names;
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), &::closedir);
  if (!d) return names;
  while (const dirent* e = ::readdir(d.get())) names.emplace_back(e->d_name);
  return names;
}

}  // namespace

std::string entry_path(const std::string& dir, const std::string& hex) {
  return dir + "/" + hex.substr(0, 2) + "/" + hex + ".cubin";
}

std::string lock_dir(const std::string& dir) { return dir + "/locks"; }

std::string lock_path(const std::string& dir, const std::string& hex) {
  return lock_dir(dir) + "/" + hex + ".lock";
}

std::string quarantine_dir(const std::string& dir) { return dir + "/quarantine"; }

namespace {

// Files in the shard directories of `dir` whose names pass `keep`; `hex_of` extracts the hex.
template <typename Keep>
std::vector<EntryFile> scan_shards(const std::string& dir, Keep keep) {
  std::vector<EntryFile> files;
  for (const auto& shard : directory_names(dir)) {
    if (shard.size() != 2 || !is_hex(shard)) continue;
    for (const auto& name : directory_names(dir + "/" + shard)) {
      std::string hex;
      if (!keep(name, &hex)) continue;
      EntryFile f;
      f.path = dir + "/" + shard + "/" + name;
      f.hex = hex;
      struct stat st {};
      if (::stat(f.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      f.bytes = static_cast<uint64_t>(st.st_size);
      f.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
      files.push_back(f);
    }
  }
  return files;
}

constexpr char kEntrySuffix[] = ".cubin";
constexpr char kTempInfix[] = ".cubin.tmp.";

}  // namespace

std::vector<EntryFile> scan_entry_files(const std::string& dir) {
  return scan_shards(dir, [](const std::string& name, std::string* hex) {
    const std::string suffix = kEntrySuffix;
    if (name.size() <= suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      return false;
    }
    *hex = name.substr(0, name.size() - suffix.size());
    return is_hex(*hex);  // skips ".<hex>.cubin.tmp.*" and strays
  });
}

std::vector<EntryFile> scan_temp_files(const std::string& dir) {
  return scan_shards(dir, [](const std::string& name, std::string* hex) {
    const size_t infix = name.find(kTempInfix);
    if (name.empty() || name[0] != '.' || infix == std::string::npos) return false;
    *hex = name.substr(1, infix - 1);
    return is_hex(*hex);
  });
}

}  // namespace mlajit::jit
