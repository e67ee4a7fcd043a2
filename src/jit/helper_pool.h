#pragma once
// Compiler helpers kept for reuse: starting one costs posix_spawn + exec + loading libnvrtc
// (~25-45 ms on the 2-core machine, mostly NVRTC's 200,000 relocations), a compile through an
// idle one only the socket round trip. One helper serves one compile at a time; concurrent
// compiles get one each. Helpers that failed are never pooled. An idle helper holds memory
// (libnvrtc's relocated pages, what is left of its heap after malloc_trim): one idle past
// the idle limit is retired (killed and reaped) by a small thread that exists only while
// helpers are idle, so a server that compiled its kernels at start-up is left with none.
#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "jit/compiler_helper.h"

namespace mlajit::jit {

class HelperPool {
 public:
  // The process-wide pool. It is never destroyed: a child of fork() inherits it with the
  // retiring thread gone, and destroying a condition variable that thread was waiting on
  // blocks forever (glibc). Its idle helpers are retired at exit by an atexit handler,
  // which does nothing in a forked child.
  static HelperPool& instance();

  // `max_idle`: helpers kept waiting; `idle_limit`: how long one may wait before it is retired.
  HelperPool(size_t max_idle, std::chrono::milliseconds idle_limit);
  // stop(). A pool must be destroyed by the process that made it (see instance()).
  ~HelperPool();
  // Stops the retiring thread and retires the idle helpers; later releases retire theirs at
  // once. In a forked child: touches nothing (see forked()).
  void stop();

  // An idle helper started from `path` with NVRTC `nvrtc_version`, else a new one (see
  // CompilerHelper::start for what it throws).
  std::unique_ptr<CompilerHelper> acquire(const std::string& path, int nvrtc_version,
                                          Deadline deadline);
  // Keeps a usable helper for the next acquire(); retires one that failed or does not fit.
  void release(std::unique_ptr<CompilerHelper> helper);

  size_t idle_count() const;
  std::vector<pid_t> idle_pids() const;
  void retire_idle();  // every idle helper, now

 private:
  struct Idle {
    std::unique_ptr<CompilerHelper> helper;
    std::chrono::steady_clock::time_point since;
  };
  // A child of fork() (a caller's worker process) shares the parent's helpers' sockets but is
  // not their parent: it must neither use nor kill them, and the pool's mutex may have been
  // held by another thread at the fork. Such a process starts one-off helpers instead.
  bool forked() const;
  std::vector<Idle> take_expired_locked();
  // The retiring thread's body: sleeps until the oldest idle helper expires, retires what
  // expired, and ends when none is idle (or the pool stops).
  void retire_when_idle();

  const size_t max_idle_;
  const std::chrono::milliseconds idle_limit_;
  const pid_t owner_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;  // stopping_ or retiring_ changed
  std::vector<Idle> idle_;
  bool retiring_ = false;  // the retiring thread runs
  bool stopping_ = false;
};

}  // namespace mlajit::jit
