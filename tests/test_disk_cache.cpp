// DiskCache: entry format, layered lookup, damage handling, races between threads and between
// processes, crash safety, LRU, no-JIT and environment options. Each test uses its own mkdtemp
// directory. Multi-process tests run tests/workers/cache_worker.
//
// Tests run as root here, and root ignores directory permissions, so "a user dir that cannot be
// written" is simulated with a path below a regular FILE (mkdir fails with ENOTDIR), and a write
// that fails part-way with RLIMIT_FSIZE in a forked child. When not root, the chmod 0555
// variant runs too.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/sinks/base_sink.h>
#include <xxhash.h>

#include "env_guard.h"
#include "temp_dir.h"
#include "test_payloads.h"
#include "common/logging.h"
#include "jit/cache_file_io.h"
#include "jit/cache_file_lock.h"
#include "jit/cache_layout.h"
#include "jit/cache_options.h"
#include "jit/disk_cache.h"
#include "mlajit/error.h"

extern char** environ;

using mlajit::test::EnvGuard;
using mlajit::test::payload_for;
using mlajit::test::TempDir;

namespace {

using namespace mlajit::jit;
using mlajit::Error;
using mlajit::ErrorCode;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// A build function that counts its calls (and can be slow, to widen race windows).
std::function<CacheEntry()> counting_build(std::atomic<int>& calls, const CacheKey& key,
                                           int sleep_ms = 0) {
  return [&calls, key, sleep_ms] {
    ++calls;
    if (sleep_ms) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    return CacheEntry{"", payload_for(key.text), "meta:" + key.text};
  };
}

CacheOptions user_only(const std::string& dir) {
  CacheOptions options;
  options.user_dir = dir;
  return options;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

void set_mtime(const std::string& path, int64_t unix_seconds) {
  timespec times[2] = {{unix_seconds, 0}, {unix_seconds, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

int64_t mtime_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mtim.tv_sec;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

size_t count_files(const std::string& dir) {
  if (!fs::exists(dir)) return 0;
  return size_t(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

// Collects what the "mlajit.cache" logger says at warn level or above.
class WarningSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<std::string> messages() {
    std::lock_guard<std::mutex> lock(mutex_);
    return messages_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (msg.level >= spdlog::level::warn) messages_.emplace_back(msg.payload.data(), msg.payload.size());
  }
  void flush_() override {}

 private:
  std::vector<std::string> messages_;
};

struct WarningCapture {
  std::shared_ptr<spdlog::logger> log = mlajit::logger("mlajit.cache");
  std::shared_ptr<WarningSink> sink = std::make_shared<WarningSink>();
  WarningCapture() { log->sinks().push_back(sink); }
  ~WarningCapture() {
    auto& sinks = log->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
  }
  size_t count_containing(const std::string& text) {
    const auto m = sink->messages();
    return size_t(std::count_if(m.begin(), m.end(), [&](const std::string& s) {
      return s.find(text) != std::string::npos;
    }));
  }
  size_t count() { return sink->messages().size(); }
};

std::string worker_path() {
  const char* dir = std::getenv("MLAJIT_TEST_WORKER_DIR");
  return std::string(dir && *dir ? dir : MLAJIT_TEST_WORKER_DIR) + "/cache_worker";
}

pid_t spawn_worker(const std::string& mode, const std::string& user_dir, const std::string& key,
                   const std::string& aux) {
  const std::string path = worker_path();
  REQUIRE(::access(path.c_str(), X_OK) == 0);
  std::vector<std::string> args = {path, mode, user_dir, key, aux};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  REQUIRE(::posix_spawn(&pid, path.c_str(), nullptr, nullptr, argv.data(), environ) == 0);
  return pid;
}

int wait_exit_code(pid_t pid) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool wait_for_file(const std::string& path, std::chrono::milliseconds timeout) {
  const auto end = Clock::now() + timeout;
  while (Clock::now() < end) {
    if (::access(path.c_str(), F_OK) == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

void kill_and_reap(pid_t pid) {
  REQUIRE(::kill(pid, SIGKILL) == 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFSIGNALED(status));
}

}  // namespace

// ---------------------------------------------------------------------------------- format

TEST_CASE("a cache key is the XXH3-128 of its text, and its seed the low 64 bits") {
  const CacheKey key = CacheKey::from_text("spec=mla d=576 arch=sm_90a");
  const XXH128_hash_t h = XXH3_128bits(key.text.data(), key.text.size());
  REQUIRE(key.hex.size() == 32);
  REQUIRE(key.hex == fmt::format("{:016x}{:016x}", h.high64, h.low64));
  REQUIRE(key.seed() == h.low64);
  REQUIRE(CacheKey::from_text("other").hex != key.hex);
  REQUIRE(CacheKey::from_text(key.text).hex == key.hex);
}

TEST_CASE("a cache entry round-trips through encode and decode") {
  const CacheEntry entry{"key text", payload_for("key text"), "metadata"};
  std::string problem = "unset";
  const auto decoded = decode_cache_entry(encode_cache_entry(entry), "key text", &problem);
  REQUIRE(decoded);
  REQUIRE(problem.empty());
  REQUIRE(decoded->key_text == entry.key_text);
  REQUIRE(decoded->metadata == entry.metadata);
  REQUIRE(decoded->payload == entry.payload);
  REQUIRE(decode_cache_entry(encode_cache_entry(entry), "", &problem));  // "" accepts any key
  const CacheEntry empty{"k", {}, ""};
  REQUIRE(decode_cache_entry(encode_cache_entry(empty), "k", &problem));
}

TEST_CASE("decoding names each kind of damage") {
  const CacheEntry entry{"key text", payload_for("key text"), "metadata"};
  const std::vector<uint8_t> good = encode_cache_entry(entry);
  const size_t header = good.size() - entry.payload.size();
  const auto problem_of = [](const std::vector<uint8_t>& bytes, const std::string& key = "key text") {
    std::string problem;
    REQUIRE_FALSE(decode_cache_entry(bytes, key, &problem));
    REQUIRE_FALSE(problem.empty());
    return problem;
  };
  auto bytes = good;

  SECTION("empty") { REQUIRE_THAT(problem_of({}), Catch::Contains("truncated")); }
  SECTION("truncated in the payload") {
    bytes.resize(bytes.size() - 1);
    REQUIRE_THAT(problem_of(bytes), Catch::Contains("truncated"));
  }
  SECTION("truncated at every header byte") {
    for (size_t n = 0; n < header; ++n) {
      INFO("length " << n);
      problem_of(std::vector<uint8_t>(good.begin(), good.begin() + long(n)));
    }
  }
  SECTION("trailing bytes") {
    bytes.push_back(0);
    REQUIRE_THAT(problem_of(bytes), Catch::Contains("trailing"));
  }
  SECTION("bad magic") {
    bytes[0] = 'X';
    REQUIRE_THAT(problem_of(bytes), Catch::Contains("magic"));
  }
  SECTION("unknown version") {
    bytes[8] = 99;
    REQUIRE_THAT(problem_of(bytes), Catch::Contains("version 99"));
  }
  SECTION("a huge key length is refused before allocating") {
    bytes[12] = bytes[13] = bytes[14] = bytes[15] = 0xff;
    REQUIRE_THAT(problem_of(bytes), Catch::Contains("exceeds the limit"));
  }
  SECTION("a key length beyond the file") {
    bytes[12] = 0;
    bytes[13] = 0;
    bytes[14] = 1;  // 64 KiB key text in a 4 KiB file
    REQUIRE_THAT(problem_of(bytes), Catch::Contains("truncated"));
  }
  SECTION("a flipped key byte breaks the header checksum") {
    bytes[16] ^= 1;
    REQUIRE_THAT(problem_of(bytes), Catch::Contains("header checksum"));
  }
  SECTION("a flipped payload byte breaks the payload checksum") {
    bytes[header + 100] ^= 0x40;
    REQUIRE_THAT(problem_of(bytes), Catch::Contains("payload checksum"));
  }
  SECTION("another key's entry") {
    REQUIRE_THAT(problem_of(good, "a different key"), Catch::Contains("key mismatch"));
  }
}

TEST_CASE("decoding random damage never crashes and never accepts a changed entry") {
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::printf("decode fuzz seed: %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const CacheEntry entry{"fuzz key", std::vector<uint8_t>(300, 7), "m"};
  const std::vector<uint8_t> good = encode_cache_entry(entry);
  for (int i = 0; i < 3000; ++i) {
    std::vector<uint8_t> bytes = good;
    const int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 4) {
        case 0: if (!bytes.empty()) bytes[rng() % bytes.size()] ^= uint8_t(1 + rng() % 255); break;
        case 1: bytes.resize(rng() % (bytes.size() + 1)); break;
        case 2: bytes.insert(bytes.begin() + long(rng() % (bytes.size() + 1)), uint8_t(rng())); break;
        default: if (bytes.size() >= 16) for (int k = 12; k < 16; ++k) bytes[k] = uint8_t(rng()); break;
      }
    }
    std::string problem;
    const auto decoded = decode_cache_entry(bytes, "", &problem);
    if (decoded) {
      REQUIRE(bytes == good);  // only an unchanged file may decode
    } else {
      REQUIRE_FALSE(problem.empty());
    }
  }
}

// ---------------------------------------------------------------------------------- lookup

TEST_CASE("a second lookup builds nothing, in the same cache and in a new one on the same dir") {
  TempDir tmp("mlajit-cache-test");
  const CacheKey key = CacheKey::from_text("second lookup");
  std::atomic<int> calls{0};
  {
    DiskCache cache(user_only(tmp.path()));
    REQUIRE(cache.user_dir_writable());
    REQUIRE(cache.get_or_build(key, counting_build(calls, key)).payload == payload_for(key.text));
    const CacheEntry again = cache.get_or_build(key, counting_build(calls, key));
    REQUIRE(again.payload == payload_for(key.text));
    REQUIRE(again.metadata == "meta:" + key.text);
    REQUIRE(calls == 1);
    REQUIRE(cache.stats().memory_hits == 1);
    REQUIRE(cache.stats().builds == 1);
    REQUIRE(cache.stats().misses == 1);
  }
  REQUIRE(fs::exists(entry_path(tmp.path(), key.hex)));
  DiskCache fresh(user_only(tmp.path()));
  const CacheEntry loaded = fresh.get_or_build(key, counting_build(calls, key));
  REQUIRE(calls == 1);
  REQUIRE(loaded.payload == payload_for(key.text));
  REQUIRE(loaded.key_text == key.text);
  REQUIRE(fresh.stats().disk_hits == 1);
  REQUIRE(fresh.stats().builds == 0);
  REQUIRE(fresh.lookup(key));
  REQUIRE_FALSE(fresh.lookup(CacheKey::from_text("never stored")));
}

TEST_CASE("a damaged cache entry is warned about, quarantined and rebuilt") {
  const CacheKey key = CacheKey::from_text("damaged entry");
  const CacheKey other = CacheKey::from_text("some other key");
  using Damage = std::function<void(const std::string& dir, const std::string& path)>;
  const std::vector<std::pair<std::string, Damage>> damages = {
      {"truncated", [](const std::string&, const std::string& p) { fs::resize_file(p, fs::file_size(p) - 10); }},
      {"flipped payload byte",
       [](const std::string&, const std::string& p) {
         auto b = read_bytes(p);
         b[b.size() - 5] ^= 1;
         write_bytes(p, b);
       }},
      {"foreign key",
       [&](const std::string& dir, const std::string& p) {
         std::atomic<int> unused{0};
         DiskCache(user_only(dir)).get_or_build(other, counting_build(unused, other));
         write_bytes(p, read_bytes(entry_path(dir, other.hex)));
       }},
      {"garbage", [](const std::string&, const std::string& p) { write_bytes(p, std::vector<uint8_t>(5000, 0xab)); }},
      {"empty", [](const std::string&, const std::string& p) { write_bytes(p, {}); }},
  };
  for (const auto& [name, damage] : damages) {
    INFO("damage: " << name);
    TempDir tmp("mlajit-cache-test");
    const std::string path = entry_path(tmp.path(), key.hex);
    std::atomic<int> calls{0};
    DiskCache(user_only(tmp.path())).get_or_build(key, counting_build(calls, key));
    damage(tmp.path(), path);

    WarningCapture warnings;
    DiskCache cache(user_only(tmp.path()));
    const CacheEntry rebuilt = cache.get_or_build(key, counting_build(calls, key));
    REQUIRE(calls == 2);
    REQUIRE(rebuilt.payload == payload_for(key.text));
    REQUIRE(cache.stats().bad_entries == 1);
    REQUIRE(warnings.count_containing("bad cache entry") == 1);
    REQUIRE(count_files(quarantine_dir(tmp.path())) == 1);
    REQUIRE(fs::directory_iterator(quarantine_dir(tmp.path()))->path().filename().string().rfind(key.hex + ".", 0) == 0);
    // The rebuilt entry is whole again.
    std::string problem;
    REQUIRE(decode_cache_entry(read_bytes(path), key.text, &problem));
    DiskCache(user_only(tmp.path())).get_or_build(key, counting_build(calls, key));
    REQUIRE(calls == 2);
  }
}

TEST_CASE("eight threads asking for one cold key build it once") {
  TempDir tmp("mlajit-cache-test");
  DiskCache cache(user_only(tmp.path()));
  const CacheKey key = CacheKey::from_text("thread race");
  std::atomic<int> calls{0};
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      if (cache.get_or_build(key, counting_build(calls, key, 150)).payload == payload_for(key.text)) ++good;
    });
  }
  for (auto& t : threads) t.join();
  REQUIRE(calls == 1);
  REQUIRE(good == 8);
  REQUIRE(cache.stats().builds == 1);
  REQUIRE(cache.stats().memory_hits == 7);  // the waiters were served the leader's entry
}

TEST_CASE("a failed build reaches every waiting thread and the next call retries") {
  TempDir tmp("mlajit-cache-test");
  DiskCache cache(user_only(tmp.path()));
  const CacheKey key = CacheKey::from_text("failing build");
  std::atomic<int> calls{0};
  std::atomic<int> failures{0};
  const auto failing = [&]() -> CacheEntry {
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    throw Error(ErrorCode::kCompileError, "nvrtc says no");
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      try {
        cache.get_or_build(key, failing);
      } catch (const Error& e) {
        if (e.code() == ErrorCode::kCompileError) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  REQUIRE(calls == 1);
  REQUIRE(failures == 4);
  REQUIRE(cache.get_or_build(key, counting_build(calls, key)).payload == payload_for(key.text));
  REQUIRE(calls == 2);
}

TEST_CASE("a key whose hex is not the hash of its text is refused") {
  TempDir tmp("mlajit-cache-test");
  DiskCache cache(user_only(tmp.path()));
  CacheKey key = CacheKey::from_text("x");
  key.hex = "../../etc/passwd";
  std::atomic<int> calls{0};
  REQUIRE_THROWS_AS(cache.get_or_build(key, counting_build(calls, key)), Error);
  REQUIRE(calls == 0);
}

// ---------------------------------------------------------------------------------- processes

TEST_CASE("eight processes racing for one cold key build it once") {
  TempDir tmp("mlajit-cache-test");
  const std::string user = tmp.sub("cache");
  const std::string key_text = "process race";
  std::vector<pid_t> pids;
  for (int i = 0; i < 8; ++i) pids.push_back(spawn_worker("build", user, key_text, tmp.path()));
  for (pid_t pid : pids) REQUIRE(wait_exit_code(pid) == 0);
  std::ifstream log(tmp.sub("builds.log"));
  std::vector<std::string> lines;
  for (std::string line; std::getline(log, line);) lines.push_back(line);
  REQUIRE(lines.size() == 1);
  const CacheKey key = CacheKey::from_text(key_text);
  std::string problem;
  const auto entry = decode_cache_entry(read_bytes(entry_path(user, key.hex)), key_text, &problem);
  INFO(problem);
  REQUIRE(entry);
  REQUIRE(entry->payload == payload_for(key_text));
}

TEST_CASE("a lock holder killed with SIGKILL does not block the next process") {
  TempDir tmp("mlajit-cache-test");
  const std::string user = tmp.sub("cache");
  const CacheKey key = CacheKey::from_text("killed holder");
  const pid_t holder = spawn_worker("hold-lock-then-sleep", user, key.text, tmp.path());
  REQUIRE(wait_for_file(tmp.sub("ready"), std::chrono::seconds(10)));
  // Really held: a non-waiting attempt from here fails.
  REQUIRE(CacheFileLock::acquire(lock_path(user, key.hex), std::chrono::milliseconds(0)).outcome() ==
          CacheFileLock::Outcome::kTimedOut);
  kill_and_reap(holder);

  CacheOptions options = user_only(user);
  options.lock_wait = std::chrono::seconds(30);
  DiskCache cache(options);
  std::atomic<int> calls{0};
  const auto start = Clock::now();
  REQUIRE(cache.get_or_build(key, counting_build(calls, key)).payload == payload_for(key.text));
  REQUIRE(Clock::now() - start < std::chrono::seconds(10));  // far below lock_wait (30 s)
  REQUIRE(calls == 1);
}

TEST_CASE("a lock held past lock_wait is given up with a warning and the key built anyway") {
  TempDir tmp("mlajit-cache-test");
  const CacheKey key = CacheKey::from_text("stuck holder");
  CacheOptions options = user_only(tmp.path());
  options.lock_wait = std::chrono::milliseconds(300);
  DiskCache cache(options);
  // A second open file description conflicts with the cache's, even in one process.
  std::string problem;
  REQUIRE(make_directories(lock_dir(tmp.path()), &problem));
  const auto held = CacheFileLock::acquire(lock_path(tmp.path(), key.hex), std::chrono::seconds(1));
  REQUIRE(held.held());
  WarningCapture warnings;
  std::atomic<int> calls{0};
  const auto start = Clock::now();
  REQUIRE(cache.get_or_build(key, counting_build(calls, key)).payload == payload_for(key.text));
  const auto elapsed = Clock::now() - start;
  REQUIRE(elapsed >= std::chrono::milliseconds(300));
  REQUIRE(elapsed < std::chrono::seconds(10));  // gave up, did not wait on
  REQUIRE(calls == 1);
  REQUIRE(warnings.count_containing("without the lock") == 1);
}

TEST_CASE("a process killed mid-write leaves no entry and the next process builds") {
  TempDir tmp("mlajit-cache-test");
  const std::string user = tmp.sub("cache");
  const CacheKey key = CacheKey::from_text("killed writer");
  const std::string path = entry_path(user, key.hex);
  const pid_t writer = spawn_worker("write-then-sleep", user, key.text, tmp.path());
  REQUIRE(wait_for_file(tmp.sub("ready"), std::chrono::seconds(10)));
  REQUIRE(count_files(fs::path(path).parent_path()) == 1);  // the temp file, fully written
  REQUIRE_FALSE(fs::exists(path));
  kill_and_reap(writer);
  REQUIRE_FALSE(fs::exists(path));

  CacheOptions options = user_only(user);
  options.lock_wait = std::chrono::seconds(30);
  DiskCache cache(options);
  std::atomic<int> calls{0};
  const auto start = Clock::now();
  REQUIRE(cache.get_or_build(key, counting_build(calls, key)).payload == payload_for(key.text));
  REQUIRE(Clock::now() - start < std::chrono::seconds(10));  // far below lock_wait (30 s)
  REQUIRE(calls == 1);
  const auto listing = cache.list();  // the abandoned temp file is not an entry
  REQUIRE(listing.size() == 1);
  REQUIRE(listing[0].verifies);
  REQUIRE(listing[0].key_text == key.text);

  // prune clears the abandoned temp file once it is an hour old, not before.
  const auto temps = scan_temp_files(user);
  REQUIRE(temps.size() == 1);
  cache.prune(UINT64_MAX);
  REQUIRE(fs::exists(temps[0].path));
  set_mtime(temps[0].path, unix_now() - 7200);
  cache.prune(UINT64_MAX);
  REQUIRE_FALSE(fs::exists(temps[0].path));
  REQUIRE(fs::exists(path));
}

// ---------------------------------------------------------------------------------- degraded

TEST_CASE("an unwritable user dir degrades to memory only") {
  TempDir tmp("mlajit-cache-test");
  std::vector<std::string> dirs;
  // Root ignores permissions: a dir below a regular file can never be created.
  write_bytes(tmp.sub("a-file"), {1});
  dirs.push_back(tmp.sub("a-file") + "/cache");
  if (::geteuid() != 0) {
    fs::create_directories(tmp.sub("ro"));
    fs::permissions(tmp.sub("ro"), fs::perms(0555));
    dirs.push_back(tmp.sub("ro"));
  }
  for (const auto& dir : dirs) {
    INFO("user dir " << dir);
    WarningCapture warnings;
    DiskCache cache(user_only(dir));
    REQUIRE_FALSE(cache.user_dir_writable());
    REQUIRE(warnings.count_containing("memory only") == 1);
    const CacheKey key = CacheKey::from_text("memory only");
    std::atomic<int> calls{0};
    REQUIRE(cache.get_or_build(key, counting_build(calls, key)).payload == payload_for(key.text));
    REQUIRE(cache.get_or_build(key, counting_build(calls, key)).payload == payload_for(key.text));
    REQUIRE(calls == 1);
    REQUIRE(cache.prune(0).empty());
  }
}

TEST_CASE("a write that fails with EFBIG keeps the entry in memory and leaves no torn file") {
  TempDir tmp("mlajit-cache-test");
  const CacheKey key = CacheKey::from_text("file size limit");
  const std::string path = entry_path(tmp.path(), key.hex);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // No Catch2 in the child: report through the exit status.
    ::signal(SIGXFSZ, SIG_IGN);  // so write() fails with EFBIG instead of killing us
    rlimit limit{1024, 1024};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(10);
    DiskCache cache(user_only(tmp.path()));
    if (!cache.user_dir_writable()) ::_exit(11);  // the 1-byte probe fits the limit
    std::atomic<int> calls{0};
    try {
      if (cache.get_or_build(key, counting_build(calls, key)).payload != payload_for(key.text)) ::_exit(12);
      if (cache.get_or_build(key, counting_build(calls, key)).payload != payload_for(key.text)) ::_exit(13);
    } catch (...) {
      ::_exit(14);
    }
    if (calls != 1) ::_exit(15);
    ::_exit(0);
  }
  REQUIRE(wait_exit_code(child) == 0);
  REQUIRE_FALSE(fs::exists(path));
  REQUIRE(count_files(fs::path(path).parent_path()) == 0);  // the partial temp file is gone
}

// ---------------------------------------------------------------------------------- layers

TEST_CASE("a read-only layer is consulted first and never written") {
  TempDir tmp("mlajit-cache-test");
  const std::string shipped = tmp.sub("shipped"), user = tmp.sub("user");
  const CacheKey key = CacheKey::from_text("shipped kernel");
  // The shipped layer says "shipped", the user layer "user": the shipped one must win.
  write_bytes(entry_path(shipped, key.hex), encode_cache_entry({key.text, payload_for(key.text), "shipped"}));
  write_bytes(entry_path(user, key.hex), encode_cache_entry({key.text, payload_for(key.text), "user"}));
  set_mtime(entry_path(shipped, key.hex), 1000000);

  CacheOptions options = user_only(user);
  options.read_only_dirs = {tmp.sub("missing-layer"), shipped};
  DiskCache cache(options);
  std::atomic<int> calls{0};
  REQUIRE(cache.get_or_build(key, counting_build(calls, key)).metadata == "shipped");
  REQUIRE(calls == 0);
  REQUIRE(cache.stats().disk_hits == 1);
  REQUIRE(mtime_of(entry_path(shipped, key.hex)) == 1000000);  // not even the last-use stamp

  const CacheKey fresh = CacheKey::from_text("not shipped");
  cache.get_or_build(fresh, counting_build(calls, fresh));
  REQUIRE(calls == 1);
  REQUIRE(fs::exists(entry_path(user, fresh.hex)));
  REQUIRE_FALSE(fs::exists(entry_path(shipped, fresh.hex)));
  cache.prune(0);
  REQUIRE(fs::exists(entry_path(shipped, key.hex)));  // pruning never touches shipped layers
  const auto listing = cache.list();
  REQUIRE(std::count_if(listing.begin(), listing.end(), [](const CacheListing& l) { return l.layer == "shipped"; }) == 1);
}

TEST_CASE("a bad entry in a read-only layer is skipped with a warning, not quarantined") {
  TempDir tmp("mlajit-cache-test");
  const std::string shipped = tmp.sub("shipped"), user = tmp.sub("user");
  const CacheKey key = CacheKey::from_text("bad shipped kernel");
  const std::string bad = entry_path(shipped, key.hex);
  write_bytes(bad, std::vector<uint8_t>(100, 0));
  CacheOptions options = user_only(user);
  options.read_only_dirs = {shipped};
  WarningCapture warnings;
  DiskCache cache(options);
  std::atomic<int> calls{0};
  REQUIRE(cache.get_or_build(key, counting_build(calls, key)).payload == payload_for(key.text));
  REQUIRE(calls == 1);
  REQUIRE(warnings.count_containing("read-only layer") == 1);
  REQUIRE(read_bytes(bad) == std::vector<uint8_t>(100, 0));
  REQUIRE_FALSE(fs::exists(quarantine_dir(shipped)));
  REQUIRE(cache.stats().bad_entries == 0);
  REQUIRE(fs::exists(entry_path(user, key.hex)));
}

TEST_CASE("no_jit turns a miss into kCacheMiss and still serves hits") {
  TempDir tmp("mlajit-cache-test");
  const CacheKey key = CacheKey::from_text("precompiled kernel");
  std::atomic<int> calls{0};
  CacheOptions options = user_only(tmp.path());
  options.no_jit = true;
  {
    DiskCache cache(options);
    try {
      cache.get_or_build(key, counting_build(calls, key));
      FAIL("expected kCacheMiss");
    } catch (const Error& e) {
      REQUIRE(e.code() == ErrorCode::kCacheMiss);
      REQUIRE_THAT(e.what(), Catch::Contains(key.text) && Catch::Contains(tmp.path()) &&
                                 Catch::Contains("mlajit precompile") && Catch::Contains("MLAJIT_NO_JIT"));
    }
    REQUIRE(calls == 0);
  }
  DiskCache(user_only(tmp.path())).get_or_build(key, counting_build(calls, key));
  DiskCache no_jit(options);
  REQUIRE(no_jit.get_or_build(key, counting_build(calls, key)).payload == payload_for(key.text));
  REQUIRE(calls == 1);
}

// ---------------------------------------------------------------------------------- LRU

TEST_CASE("prune removes the least recently used entries until the budget holds") {
  TempDir tmp("mlajit-cache-test");
  DiskCache cache(user_only(tmp.path()));
  std::atomic<int> calls{0};
  std::vector<CacheKey> keys;
  const int64_t now = unix_now();
  for (int i = 0; i < 5; ++i) {
    keys.push_back(CacheKey::from_text("lru " + std::to_string(i)));
    cache.get_or_build(keys.back(), counting_build(calls, keys.back()));
    set_mtime(entry_path(tmp.path(), keys.back().hex), now - 1000 + 100 * i);  // key 0 oldest
  }
  const uint64_t entry_bytes = fs::file_size(entry_path(tmp.path(), keys[0].hex));

  SECTION("by size") {
    const auto removed = cache.prune(3 * entry_bytes);
    REQUIRE(removed.size() == 2);
    REQUIRE(removed[0].key_text == keys[0].text);
    REQUIRE(removed[1].key_text == keys[1].text);
    for (int i = 0; i < 5; ++i) REQUIRE(fs::exists(entry_path(tmp.path(), keys[i].hex)) == (i >= 2));
  }
  SECTION("by age") {
    const auto removed = cache.prune(UINT64_MAX, std::chrono::seconds(750));  // keys 0..2
    REQUIRE(removed.size() == 3);
    for (int i = 0; i < 5; ++i) REQUIRE(fs::exists(entry_path(tmp.path(), keys[i].hex)) == (i >= 3));
  }
  SECTION("by an age reaching back past the epoch: nothing (once a ns overflow removed all)") {
    REQUIRE(cache.prune(UINT64_MAX, std::chrono::seconds(int64_t{200000} * 86400)).empty());
    REQUIRE(cache.prune(UINT64_MAX, std::chrono::seconds::max()).empty());
    for (int i = 0; i < 5; ++i) REQUIRE(fs::exists(entry_path(tmp.path(), keys[i].hex)));
  }
  SECTION("a negative age is refused, naming it") {
    try {
      cache.prune(UINT64_MAX, std::chrono::seconds(-5));
      FAIL("a negative age was accepted");
    } catch (const Error& e) {
      REQUIRE(e.code() == ErrorCode::kInvalidArgument);
      REQUIRE_THAT(e.what(), Catch::Matchers::Contains("-5 s"));
    }
    for (int i = 0; i < 5; ++i) REQUIRE(fs::exists(entry_path(tmp.path(), keys[i].hex)));
  }
  SECTION("a disk hit makes an entry the most recently used") {
    DiskCache(user_only(tmp.path())).get_or_build(keys[0], counting_build(calls, keys[0]));
    REQUIRE(mtime_of(entry_path(tmp.path(), keys[0].hex)) >= now - 5);
    const auto listing = cache.list();
    for (const auto& l : listing) {
      if (l.key_text == keys[0].text) REQUIRE(l.last_use_unix >= now - 5);
    }
    cache.prune(4 * entry_bytes);
    REQUIRE(fs::exists(entry_path(tmp.path(), keys[0].hex)));
    REQUIRE_FALSE(fs::exists(entry_path(tmp.path(), keys[1].hex)));
  }
  REQUIRE(calls == 5);
}

TEST_CASE("max_bytes prunes the user layer after each store") {
  TempDir tmp("mlajit-cache-test");
  std::atomic<int> calls{0};
  std::vector<CacheKey> keys;
  for (int i = 0; i < 4; ++i) keys.push_back(CacheKey::from_text("budget " + std::to_string(i)));
  CacheOptions options = user_only(tmp.path());
  DiskCache probe(options);
  probe.get_or_build(keys[0], counting_build(calls, keys[0]));
  const uint64_t entry_bytes = fs::file_size(entry_path(tmp.path(), keys[0].hex));
  options.max_bytes = entry_bytes * 5 / 2;
  DiskCache cache(options);
  cache.get_or_build(keys[1], counting_build(calls, keys[1]));
  set_mtime(entry_path(tmp.path(), keys[0].hex), unix_now() - 200);
  set_mtime(entry_path(tmp.path(), keys[1].hex), unix_now() - 100);
  cache.get_or_build(keys[2], counting_build(calls, keys[2]));  // evicts key 0
  cache.get_or_build(keys[3], counting_build(calls, keys[3]));  // evicts key 1
  for (int i = 0; i < 4; ++i) REQUIRE(fs::exists(entry_path(tmp.path(), keys[i].hex)) == (i >= 2));
}

TEST_CASE("list reports each entry, whether it verifies, and why not") {
  TempDir tmp("mlajit-cache-test");
  DiskCache cache(user_only(tmp.path()));
  const CacheKey good = CacheKey::from_text("listed");
  const CacheKey misplaced = CacheKey::from_text("misplaced");
  std::atomic<int> calls{0};
  cache.get_or_build(good, counting_build(calls, good));
  write_bytes(entry_path(tmp.path(), misplaced.hex), read_bytes(entry_path(tmp.path(), good.hex)));
  write_bytes(entry_path(tmp.path(), CacheKey::from_text("junk").hex), {1, 2, 3});
  auto listing = cache.list();
  REQUIRE(listing.size() == 3);
  int verifying = 0;
  for (const auto& l : listing) {
    REQUIRE(l.layer == "user");
    if (l.verifies) {
      ++verifying;
      REQUIRE(l.key_text == good.text);
      REQUIRE(l.metadata == "meta:" + good.text);
      REQUIRE(l.path == entry_path(tmp.path(), good.hex));
    } else {
      REQUIRE_FALSE(l.problem.empty());
    }
  }
  REQUIRE(verifying == 1);
}

// ---------------------------------------------------------------------------------- options

TEST_CASE("cache options come from the environment") {
  EnvGuard env({"MLAJIT_CACHE_PATH", "MLAJIT_CACHE_DIR", "XDG_CACHE_HOME", "HOME",
                "MLAJIT_CACHE_MAX_BYTES", "MLAJIT_NO_JIT"});
  ::setenv("HOME", "/home/someone", 1);
  CacheOptions o = CacheOptions::from_environment();
  REQUIRE(o.user_dir == "/home/someone/.cache/mlajit");
  REQUIRE(o.read_only_dirs.empty());
  REQUIRE(o.max_bytes == 0);
  REQUIRE_FALSE(o.no_jit);

  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  REQUIRE(CacheOptions::from_environment().user_dir == "/xdg/mlajit");
  ::setenv("XDG_CACHE_HOME", "relative", 1);  // invalid per the XDG spec: ignored
  REQUIRE(CacheOptions::from_environment().user_dir == "/home/someone/.cache/mlajit");
  ::setenv("MLAJIT_CACHE_DIR", "/explicit", 1);
  ::setenv("MLAJIT_CACHE_PATH", "/a::/b:", 1);
  ::setenv("MLAJIT_CACHE_MAX_BYTES", "10M", 1);
  ::setenv("MLAJIT_NO_JIT", "1", 1);
  o = CacheOptions::from_environment();
  REQUIRE(o.user_dir == "/explicit");
  REQUIRE(o.read_only_dirs == std::vector<std::string>{"/a", "/b"});
  REQUIRE(o.max_bytes == 10ull << 20);
  REQUIRE(o.no_jit);

  for (const char* bad : {"ten", "10X", "-5", "99999999999999999999", "5G5"}) {
    INFO("MLAJIT_CACHE_MAX_BYTES=" << bad);
    ::setenv("MLAJIT_CACHE_MAX_BYTES", bad, 1);
    try {
      CacheOptions::from_environment();
      FAIL("expected kInvalidArgument");
    } catch (const Error& e) {
      REQUIRE(e.code() == ErrorCode::kInvalidArgument);
      REQUIRE_THAT(e.what(), Catch::Contains("MLAJIT_CACHE_MAX_BYTES") && Catch::Contains(bad));
    }
  }
  ::setenv("MLAJIT_CACHE_MAX_BYTES", "2g", 1);
  ::setenv("MLAJIT_NO_JIT", "maybe", 1);
  REQUIRE_THROWS_AS(CacheOptions::from_environment(), Error);
  ::setenv("MLAJIT_NO_JIT", "0", 1);
  REQUIRE(CacheOptions::from_environment().max_bytes == 2ull << 30);
  REQUIRE_FALSE(CacheOptions::from_environment().no_jit);
}

TEST_CASE("byte sizes accept K, M and G suffixes") {
  REQUIRE(parse_byte_size("0", "x") == 0);
  REQUIRE(parse_byte_size("123", "x") == 123);
  REQUIRE(parse_byte_size("4K", "x") == 4096);
  REQUIRE(parse_byte_size("3m", "x") == 3ull << 20);
  REQUIRE(parse_byte_size("1GiB", "x") == 1ull << 30);
  REQUIRE_THROWS_AS(parse_byte_size("", "x"), Error);
  REQUIRE_THROWS_AS(parse_byte_size("20000000000G", "x"), Error);
}

// ---------------------------------------------------------------------------------- more faults
// (issue 6: cache faults beyond the ones above)

namespace {

// `bytes` re-stamped with another format version and a header checksum that matches it, as a
// newer (or older) library would have written it: only the version makes it unreadable.
std::vector<uint8_t> with_format_version(std::vector<uint8_t> bytes, uint32_t version) {
  for (int i = 0; i < 4; ++i) bytes[8 + i] = static_cast<uint8_t>(version >> (8 * i));
  auto u32_at = [&bytes](size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t(bytes[at + i]) << (8 * i);
    return v;
  };
  const size_t key_len = u32_at(12);
  const size_t meta_len = u32_at(16 + key_len);
  const size_t header_end = 16 + key_len + 4 + meta_len + 16;  // + payload size and checksum
  const uint64_t hash = XXH3_64bits(bytes.data(), header_end);
  for (int i = 0; i < 8; ++i) bytes[header_end + i] = static_cast<uint8_t>(hash >> (8 * i));
  return bytes;
}

}  // namespace

TEST_CASE("an entry of another format version is quarantined, rebuilt, and the next process hits") {
  TempDir tmp("mlajit-cache-test");
  const CacheKey key = CacheKey::from_text("other format version");
  const std::string path = entry_path(tmp.path(), key.hex);
  std::atomic<int> calls{0};
  DiskCache(user_only(tmp.path())).get_or_build(key, counting_build(calls, key));
  write_bytes(path, with_format_version(read_bytes(path), 2));
  std::string problem;
  REQUIRE_FALSE(decode_cache_entry(read_bytes(path), key.text, &problem));
  REQUIRE_THAT(problem, Catch::Contains("format version 2"));

  WarningCapture warnings;
  {
    DiskCache cache(user_only(tmp.path()));
    REQUIRE(cache.get_or_build(key, counting_build(calls, key)).payload == payload_for(key.text));
    REQUIRE(calls == 2);
    REQUIRE(warnings.count_containing("format version 2") == 1);
    REQUIRE(count_files(quarantine_dir(tmp.path())) == 1);
  }
  DiskCache next(user_only(tmp.path()));
  REQUIRE(next.get_or_build(key, counting_build(calls, key)).payload == payload_for(key.text));
  REQUIRE(calls == 2);
  REQUIRE(next.stats().disk_hits == 1);
}

TEST_CASE("a user dir removed while the cache is alive is recreated on the next store") {
  TempDir tmp("mlajit-cache-test");
  const std::string user = tmp.sub("cache");
  const CacheKey before = CacheKey::from_text("before rm -rf"), after = CacheKey::from_text("after rm -rf");
  std::atomic<int> calls{0};
  DiskCache cache(user_only(user));
  REQUIRE(cache.get_or_build(before, counting_build(calls, before)).payload == payload_for(before.text));
  fs::remove_all(user);

  // Kept in memory: served without a build.
  REQUIRE(cache.get_or_build(before, counting_build(calls, before)).payload == payload_for(before.text));
  REQUIRE(calls == 1);
  // A new key is built, and the store recreates the directory (mkdir -p) and the entry.
  REQUIRE(cache.get_or_build(after, counting_build(calls, after)).payload == payload_for(after.text));
  REQUIRE(calls == 2);
  std::string problem;
  REQUIRE(decode_cache_entry(read_bytes(entry_path(user, after.hex)), after.text, &problem));
  // The next process finds `after` on disk, and rebuilds `before`, whose file went with the dir.
  DiskCache next(user_only(user));
  REQUIRE(next.get_or_build(after, counting_build(calls, after)).payload == payload_for(after.text));
  REQUIRE(calls == 2);
  REQUIRE(next.get_or_build(before, counting_build(calls, before)).payload == payload_for(before.text));
  REQUIRE(calls == 3);
}

TEST_CASE("a user dir replaced by a file while the cache is alive degrades with one warning") {
  TempDir tmp("mlajit-cache-test");
  const std::string user = tmp.sub("cache");
  std::atomic<int> calls{0};
  DiskCache cache(user_only(user));
  REQUIRE(cache.user_dir_writable());
  fs::remove_all(user);
  write_bytes(user, {'x'});  // now nothing can be created below it

  WarningCapture warnings;
  for (const char* text : {"k1", "k2", "k3"}) {
    const CacheKey key = CacheKey::from_text(text);
    REQUIRE(cache.get_or_build(key, counting_build(calls, key)).payload == payload_for(key.text));
    REQUIRE(cache.get_or_build(key, counting_build(calls, key)).payload == payload_for(key.text));
  }
  REQUIRE(calls == 3);  // each built once, then served from memory
  REQUIRE(warnings.count_containing("cannot write cache entry") == 1);  // once, not per key
  REQUIRE(cache.list().empty());
  REQUIRE(cache.prune(0).empty());

  // The next process repairs once the path is a directory again.
  fs::remove(user);
  DiskCache next(user_only(user));
  REQUIRE(next.user_dir_writable());
  const CacheKey key = CacheKey::from_text("k1");
  REQUIRE(next.get_or_build(key, counting_build(calls, key)).payload == payload_for(key.text));
  REQUIRE(calls == 4);
  REQUIRE(fs::exists(entry_path(user, key.hex)));
}

TEST_CASE("an entry path that is a directory or a symlink is moved aside and rebuilt") {
  const CacheKey key = CacheKey::from_text("not a file");
  for (const std::string kind : {"directory", "dangling symlink", "symlink loop"}) {
    INFO(kind);
    TempDir tmp("mlajit-cache-test");
    const std::string path = entry_path(tmp.path(), key.hex);
    fs::create_directories(fs::path(path).parent_path());
    if (kind == "directory") {
      fs::create_directories(path + "/inner");
    } else if (kind == "dangling symlink") {
      fs::create_symlink(tmp.sub("nowhere"), path);
    } else {
      fs::create_symlink(path, path);
    }
    std::atomic<int> calls{0};
    DiskCache cache(user_only(tmp.path()));
    REQUIRE(cache.get_or_build(key, counting_build(calls, key)).payload == payload_for(key.text));
    REQUIRE(calls == 1);
    DiskCache next(user_only(tmp.path()));
    REQUIRE(next.get_or_build(key, counting_build(calls, key)).payload == payload_for(key.text));
    // Moved aside (a dangling link reads as a miss, and the new entry's rename replaces it):
    // the path now holds a real entry that the next process reads.
    REQUIRE(calls == 1);
    REQUIRE(fs::is_regular_file(fs::symlink_status(path)));
  }
}

TEST_CASE("after a write that ran out of space the next process writes the entry") {
  TempDir tmp("mlajit-cache-test");
  const CacheKey key = CacheKey::from_text("disk full then repaired");
  const std::string path = entry_path(tmp.path(), key.hex);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit limit{1024, 1024};  // the entry is > 4 KiB: its write fails with EFBIG part-way
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(10);
    std::atomic<int> calls{0};
    try {
      DiskCache cache(user_only(tmp.path()));
      if (cache.get_or_build(key, counting_build(calls, key)).payload != payload_for(key.text)) ::_exit(12);
    } catch (...) {
      ::_exit(14);
    }
    ::_exit(0);
  }
  REQUIRE(wait_exit_code(child) == 0);
  REQUIRE_FALSE(fs::exists(path));
  std::atomic<int> calls{0};
  {
    DiskCache cache(user_only(tmp.path()));
    REQUIRE(cache.get_or_build(key, counting_build(calls, key)).payload == payload_for(key.text));
    REQUIRE(calls == 1);
  }
  std::string problem;
  REQUIRE(decode_cache_entry(read_bytes(path), key.text, &problem));
  DiskCache next(user_only(tmp.path()));
  REQUIRE(next.get_or_build(key, counting_build(calls, key)).payload == payload_for(key.text));
  REQUIRE(calls == 1);
}

// open(O_RDONLY) of a FIFO blocks until a writer appears: without O_NONBLOCK a FIFO at an
// entry path hung get_or_build, list() and prune() forever.
TEST_CASE("a FIFO at an entry path is moved aside instead of hanging the reader", "[fifo]") {
  TempDir tmp("mlajit-cache-test");
  const CacheKey key = CacheKey::from_text("fifo entry");
  const std::string path = entry_path(tmp.path(), key.hex);
  fs::create_directories(fs::path(path).parent_path());
  REQUIRE(::mkfifo(path.c_str(), 0644) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::alarm(10);  // a hang becomes SIGALRM, a failure, not a stuck test run
    std::atomic<int> calls{0};
    try {
      DiskCache cache(user_only(tmp.path()));
      if (cache.get_or_build(key, counting_build(calls, key)).payload != payload_for(key.text)) ::_exit(12);
      (void)cache.list();
    } catch (...) {
      ::_exit(14);
    }
    ::_exit(calls == 1 ? 0 : 15);
  }
  REQUIRE(wait_exit_code(child) == 0);
  REQUIRE(fs::is_regular_file(fs::symlink_status(path)));
}

TEST_CASE("entries and lock files get the umask's mode, so other accounts can read a shipped cache") {
  // Read the umask the only portable way (set and restore); no other thread runs here.
  const mode_t mask = ::umask(022);
  ::umask(mask);
  const mode_t expected = 0666 & ~mask;
  REQUIRE(expected == 0644);  // tests/test_main.cpp sets umask 022: 0600 would be the bug
  TempDir tmp("mlajit-cache-test");
  DiskCache cache(user_only(tmp.path()));
  const CacheKey key = CacheKey::from_text("file modes");
  std::atomic<int> calls{0};
  cache.get_or_build(key, counting_build(calls, key));
  struct stat entry {}, lock {};
  REQUIRE(::stat(entry_path(tmp.path(), key.hex).c_str(), &entry) == 0);
  CHECK((entry.st_mode & 0777) == expected);  // mkostemp alone leaves 0600
  REQUIRE(::stat(lock_path(tmp.path(), key.hex).c_str(), &lock) == 0);
  CHECK((lock.st_mode & 0777) == expected);
  CHECK(new_file_mode() == expected);
}
