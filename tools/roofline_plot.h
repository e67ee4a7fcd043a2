#pragma once
// The --plot picture of `mlajit bench`: a python3 + matplotlib script written next to the
// PNG (no C++ image dependency), run when python3 with matplotlib is present.
#include <string>

namespace mlajit::cli {

// H200 ceilings the points are drawn against.
constexpr double kHbmGbps = 4530;
constexpr double kBf16Tflops = 772;

// Writes <png without .png>.py reading `csv_path` (the bench CSV) and saving `png_path`, then
// runs it. Returns "" on success, else why no picture was made (the script stays, to be run
// later). Throws Error(kIoError) when the script cannot be written.
std::string write_and_run_roofline_plot(const std::string& csv_path, const std::string& png_path);

// `path` in single quotes for /bin/sh.
std::string shell_quote(const std::string& path);

}  // namespace mlajit::cli
