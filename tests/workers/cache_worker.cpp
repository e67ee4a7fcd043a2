// A separate process for the disk cache's multi-process tests.
//   cache_worker build <user_dir> <key_text> <aux_dir>
//       get_or_build with a builder that sleeps ~200 ms and appends "<pid>\n" to
//       <aux_dir>/builds.log (O_APPEND, so lines from racing processes never interleave).
//   cache_worker hold-lock-then-sleep <user_dir> <key_text> <aux_dir>
//       takes the key's lock file, creates <aux_dir>/ready, sleeps (the test SIGKILLs it).
//   cache_worker write-then-sleep <user_dir> <key_text> <aux_dir>
//       takes the key lock, writes and fsyncs the entry's temp file, creates <aux_dir>/ready and
//       sleeps before the rename (the test SIGKILLs it mid-write).
// Exit status: 0 ok, 2 usage, 3 wrong payload, 4 lock not acquired, 5 exception.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <fcntl.h>
#include <unistd.h>

#include "../test_payloads.h"
#include "jit/cache_file_io.h"
#include "jit/cache_file_lock.h"
#include "jit/cache_layout.h"
#include "jit/disk_cache.h"

using namespace mlajit::jit;

using mlajit::test::append_line;
using mlajit::test::payload_for;

namespace {

void create_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) ::close(fd);
}

int build(const std::string& user_dir, const CacheKey& key, const std::string& aux) {
  CacheOptions options;
  options.user_dir = user_dir;
  options.lock_wait = std::chrono::seconds(20);
  DiskCache cache(options);
  const CacheEntry entry = cache.get_or_build(key, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    append_line(aux + "/builds.log", std::to_string(::getpid()));
    return CacheEntry{key.text, payload_for(key.text), "meta"};
  });
  return entry.payload == payload_for(key.text) && entry.key_text == key.text ? 0 : 3;
}

int hold_lock(const std::string& user_dir, const CacheKey& key, const std::string& aux,
              bool write_first) {
  std::string problem;
  make_directories(lock_dir(user_dir), &problem);
  auto lock = CacheFileLock::acquire(lock_path(user_dir, key.hex), std::chrono::seconds(5));
  if (!lock.held()) return 4;
  const auto park = [&] {
    create_file(aux + "/ready");
    std::this_thread::sleep_for(std::chrono::seconds(60));
  };
  if (!write_first) {
    park();
    return 0;
  }
  const std::string path = entry_path(user_dir, key.hex);
  make_directories(path.substr(0, path.find_last_of('/')), &problem);
  write_file_atomically(path, encode_cache_entry({key.text, payload_for(key.text), "meta"}), park);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: cache_worker MODE USER_DIR KEY_TEXT AUX_DIR\n");
    return 2;
  }
  const std::string mode = argv[1], user_dir = argv[2], aux = argv[4];
  const CacheKey key = CacheKey::from_text(argv[3]);
  try {
    if (mode == "build") return build(user_dir, key, aux);
    if (mode == "hold-lock-then-sleep") return hold_lock(user_dir, key, aux, false);
    if (mode == "write-then-sleep") return hold_lock(user_dir, key, aux, true);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cache_worker: %s\n", e.what());
    return 5;
  }
  std::fprintf(stderr, "cache_worker: unknown mode %s\n", mode.c_str());
  return 2;
}
