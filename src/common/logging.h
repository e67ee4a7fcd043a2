#pragma once
// One spdlog logger per layer ("mlajit.jit", "mlajit.cache", ...). Levels come from
// SPDLOG_LEVEL (e.g. SPDLOG_LEVEL=debug or SPDLOG_LEVEL=mlajit.cache=debug), read once.
#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace mlajit {

// Returns the named logger, creating it (stderr sink) on first use.
std::shared_ptr<spdlog::logger> logger(const std::string& name);

}  // namespace mlajit
