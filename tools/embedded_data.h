#pragma once
// The CLI's data files (tools/data/), embedded at build time (cmake/EmbedFiles.cmake).
#include <map>
#include <string>
#include <string_view>

namespace mlajit::cli {

// File name below tools/data/ (e.g. "peer_timings_h200.csv") -> contents.
const std::map<std::string, std::string_view>& embedded_data_files();

}  // namespace mlajit::cli
