// Reuse of compiler helpers, and their retirement when idle.
#include "jit/helper_pool.h"

#include <unistd.h>

#include <algorithm>
#include <thread>

#include "common/logging.h"

namespace mlajit::jit {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

HelperPool& HelperPool::instance() {
  // As many idle helpers as compiles can usefully run at once; a minute of idleness is long
  // enough to span the burst of compiles a server meets at start-up.
  static HelperPool pool(std::max(2u, std::thread::hardware_concurrency()), std::chrono::minutes(1));
  return pool;
}

HelperPool::HelperPool(size_t max_idle, std::chrono::milliseconds idle_limit)
    : max_idle_(max_idle), idle_limit_(idle_limit), owner_(::getpid()) {}

HelperPool::~HelperPool() {
  if (forked()) {
    // Not our children: leave them to the process that started them.
    for (auto& idle : idle_) (void)idle.helper.release();
    return;
  }
  retire_idle();
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
    retired = take_expired_locked();
    idle_.push_back({std::move(helper), Clock::now()});
    if (idle_.size() > max_idle_) {
      retired.push_back(std::move(idle_.front()));
      idle_.erase(idle_.begin());
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
