// Reuse of compiler helpers, and their retirement when idle.
#include "jit/helper_pool.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <system_error>
#include <thread>

#include "common/logging.h"

namespace mlajit::jit {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

HelperPool& HelperPool::instance() {
  // As many idle helpers as compiles can usefully run at once; a minute of idleness is long
  // enough to span the burst of compiles a server meets at start-up.
  static HelperPool* pool = [] {
    auto* made = new HelperPool(std::max(2u, std::thread::hardware_concurrency()),
                                std::chrono::minutes(1));
    std::atexit([] { instance().stop(); });
    return made;
  }();
  return *pool;
}

HelperPool::HelperPool(size_t max_idle, std::chrono::milliseconds idle_limit)
    : max_idle_(max_idle), idle_limit_(idle_limit), owner_(::getpid()) {}

HelperPool::~HelperPool() {
  stop();
  for (auto& idle : idle_) (void)idle.helper.release();  // only in a forked child: not ours
}

void HelperPool::stop() {
  // In a forked child the helpers are not our children and the retiring thread (perhaps the
  // mutex's owner) did not survive the fork: leave everything to the process that made them.
  if (forked()) return;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    stopping_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return !retiring_; });
  }
  retire_idle();
}

void HelperPool::retire_when_idle() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_ && !idle_.empty()) {
    auto oldest = idle_.front().since;
    for (const auto& idle : idle_) oldest = std::min(oldest, idle.since);
    changed_.wait_until(lock, oldest + idle_limit_ + std::chrono::milliseconds(1));
    std::vector<Idle> expired = take_expired_locked();
    if (expired.empty()) continue;
    lock.unlock();
    expired.clear();  // killed and reaped, without holding up acquire() and release()
    lock.lock();
  }
  retiring_ = false;
  changed_.notify_all();  // under the lock: the destructor may free the pool right after
}

bool HelperPool::forked() const { return ::getpid() != owner_; }

std::vector<HelperPool::Idle> HelperPool::take_expired_locked() {
  std::vector<Idle> expired;
  const auto cutoff = Clock::now() - idle_limit_;
  for (auto it = idle_.begin(); it != idle_.end();) {
    if (it->since < cutoff) {
      expired.push_back(std::move(*it));
      it = idle_.erase(it);
    } else {
      ++it;
    }
  }
  return expired;
}

std::unique_ptr<CompilerHelper> HelperPool::acquire(const std::string& path, int nvrtc_version,
                                                    Deadline deadline) {
  if (!forked()) {
    std::vector<Idle> expired;  // retired outside the lock, when this scope ends
    std::lock_guard<std::mutex> lock(mutex_);
    expired = take_expired_locked();
    // Newest first: the helper idle the shortest has the warmest caches.
    for (auto it = idle_.rbegin(); it != idle_.rend(); ++it) {
      if (it->helper->path() == path && it->helper->nvrtc_version() == nvrtc_version) {
        auto helper = std::move(it->helper);
        idle_.erase(std::next(it).base());
        return helper;
      }
    }
  }
  auto helper = CompilerHelper::start(path, nvrtc_version, deadline);
  logger("mlajit.jit")->debug("started compiler helper {} (pid {})", path, helper->pid());
  return helper;
}

void HelperPool::release(std::unique_ptr<CompilerHelper> helper) {
  if (!helper || !helper->usable() || forked()) return;  // destroyed here: retired and reaped
  std::vector<Idle> retired;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;  // exiting: retire it now
    retired = take_expired_locked();
    idle_.push_back({std::move(helper), Clock::now()});
    if (idle_.size() > max_idle_) {
      retired.push_back(std::move(idle_.front()));
      idle_.erase(idle_.begin());
    }
    if (!retiring_ && !stopping_) {
      // Detached, and only while helpers are idle; the destructor waits for it to end.
      try {
        std::thread([this] { retire_when_idle(); }).detach();
        retiring_ = true;
      } catch (const std::system_error& error) {
        // No thread (EAGAIN): idle helpers are then retired by the next acquire() or
        // release() past the limit, or at exit.
        logger("mlajit.jit")->debug("no thread to retire idle compiler helpers: {}", error.what());
      }
    }
  }
}

size_t HelperPool::idle_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return idle_.size();
}

std::vector<pid_t> HelperPool::idle_pids() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<pid_t> pids;
  for (const auto& idle : idle_) pids.push_back(idle.helper->pid());
  return pids;
}

void HelperPool::retire_idle() {
  std::vector<Idle> retired;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    retired.swap(idle_);
  }
}

}  // namespace mlajit::jit
