#pragma once
// Parsing helpers behind CacheOptions::from_environment, exposed for tests and the CLI.
#include <cstdint>
#include <string>
#include <vector>

namespace mlajit::jit {

// "1048576", "512K", "64M", "2G" (binary multiples; a trailing "B" or "iB" is accepted, case
// does not matter). Throws Error(kInvalidArgument) naming `what` and the value otherwise.
uint64_t parse_byte_size(const std::string& text, const std::string& what);

// ':'-separated list; empty components are dropped.
std::vector<std::string> split_search_path(const std::string& text);

// "1"/"true"/"yes"/"on" -> true, "0"/"false"/"no"/"off"/"" -> false, else Error(kInvalidArgument).
bool parse_switch(const std::string& text, const std::string& what);

}  // namespace mlajit::jit
