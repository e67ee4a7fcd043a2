#include "common/logging.h"

#include <mutex>

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>

namespace mlajit {

std::shared_ptr<spdlog::logger> logger(const std::string& name) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto existing = spdlog::get(name)) return existing;
  auto created = spdlog::stderr_color_mt(name);
  created->set_level(spdlog::level::warn);
  // Re-apply SPDLOG_LEVEL so loggers created after start-up honour it too.
  spdlog::cfg::load_env_levels();
  return created;
}

}  // namespace mlajit
