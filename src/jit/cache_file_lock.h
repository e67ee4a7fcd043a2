#pragma once
// A per-key cross-process lock: flock(LOCK_EX) on <user_dir>/locks/<hex>.lock.
// flock rather than a pid file because the kernel releases it when the holder dies, however it
// dies (SIGKILL, OOM, power loss of a node's process), so a crashed compile never wedges others.
// The wait is bounded: on timeout the caller proceeds without the lock (a duplicate compile is
// better than a hang).
#include <chrono>
#include <string>

namespace mlajit::jit {

class CacheFileLock {
 public:
  enum class Outcome {
    kAcquired,
    kTimedOut,     // another holder kept it past the wait
    kUnavailable,  // the lock file could not be opened/created (e.g. read-only dir)
  };

  // Polls flock(LOCK_EX | LOCK_NB) with short sleeps until acquired or `wait` has passed.
  static CacheFileLock acquire(const std::string& path, std::chrono::milliseconds wait);

  CacheFileLock(CacheFileLock&& other) noexcept;
  CacheFileLock& operator=(CacheFileLock&&) = delete;
  CacheFileLock(const CacheFileLock&) = delete;
  ~CacheFileLock();  // releases

  Outcome outcome() const { return outcome_; }
  bool held() const { return outcome_ == Outcome::kAcquired; }
  const std::string& problem() const { return problem_; }
  std::chrono::milliseconds waited() const { return waited_; }

 private:
  CacheFileLock() = default;
  int fd_ = -1;
  Outcome outcome_ = Outcome::kUnavailable;
  std::string problem_;
  std::chrono::milliseconds waited_{0};
};

}  // namespace mlajit::jit
