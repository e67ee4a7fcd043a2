#include "jit/cache_file_lock.h"

#include <cerrno>
#include <thread>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>

#include "jit/cache_file_io.h"

namespace mlajit::jit {

CacheFileLock CacheFileLock::acquire(const std::string& path, std::chrono::milliseconds wait) {
  using clock = std::chrono::steady_clock;
  CacheFileLock lock;
  // O_CLOEXEC: a child spawned while we hold the lock must not inherit (and so keep) it.
  // Read-write where we may (NFS emulates flock with byte-range locks, and an exclusive one
  // needs a writable descriptor); read-only on a lock file another account created, which
  // a local flock accepts.
  lock.fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (lock.fd_ < 0 && errno == EACCES) lock.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (lock.fd_ < 0) {
    lock.problem_ = fmt::format("cannot open lock file {}: {}", path, errno_text(errno));
    return lock;
  }
  const auto start = clock::now();
  auto sleep = std::chrono::milliseconds(2);
  for (;;) {
    if (::flock(lock.fd_, LOCK_EX | LOCK_NB) == 0) {
      lock.outcome_ = Outcome::kAcquired;
      break;
    }
    if (errno != EWOULDBLOCK && errno != EINTR) {
      lock.problem_ = fmt::format("flock {} failed: {}", path, errno_text(errno));
      break;  // e.g. a file system without flock: kUnavailable
    }
    const auto elapsed = clock::now() - start;
    if (elapsed >= wait) {
      lock.outcome_ = Outcome::kTimedOut;
      lock.problem_ = fmt::format("lock {} still held by another process after {} ms", path,
                                  wait.count());
      break;
    }
    // Short sleeps first (a build of a small kernel takes well under a second), growing to
    // 50 ms so a long wait costs little CPU.
    std::this_thread::sleep_for(std::min<clock::duration>(sleep, wait - elapsed));
    sleep = std::min(sleep * 2, std::chrono::milliseconds(50));
  }
  lock.waited_ = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start);
  if (!lock.held()) {
    ::close(lock.fd_);
    lock.fd_ = -1;
  }
  return lock;
}

CacheFileLock::CacheFileLock(CacheFileLock&& other) noexcept
    : fd_(other.fd_), outcome_(other.outcome_), problem_(std::move(other.problem_)),
      waited_(other.waited_) {
  other.fd_ = -1;
}

CacheFileLock::~CacheFileLock() {
  // Closing the last descriptor of the open file description releases the flock.
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace mlajit::jit
