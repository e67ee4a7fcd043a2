#pragma once
// Host stand-in for barrier.sync 0 in the merge emulation: the emulated threads of one CTA run
// as host threads and meet here (emulate_partials.cpp sets how many).
#include <condition_variable>
#include <mutex>
namespace mlajit_kernel {
struct HostBlockBarrier {
  std::mutex mutex;
  std::condition_variable all_arrived;
  int threads = 0, arrived = 0;
  unsigned generation = 0;
  void wait() {
    std::unique_lock<std::mutex> lock(mutex);
    const unsigned mine = generation;
    if (++arrived == threads) {
      arrived = 0;
      ++generation;
      all_arrived.notify_all();
    } else {
      all_arrived.wait(lock, [&] { return generation != mine; });
    }
  }
};
inline HostBlockBarrier& host_block_barrier() {
  static HostBlockBarrier barrier;
  return barrier;
}
inline void block_barrier_across_roles() { host_block_barrier().wait(); }
}  // namespace mlajit_kernel
