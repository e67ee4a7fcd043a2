#pragma once
// Helpers shared by the CLI commands: the usage-error type (exit code 2), parsers for sizes,
// durations and lists, human-readable numbers, a plain-text table.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace mlajit::cli {

// Exit codes of every command.
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// A bad option value found after CLI11 parsed the line: exits 2 like a parse error.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs `convert`, turning mlajit::Error(kInvalidArgument) into UsageError: an option value the
// library rejects (an unknown arch, a bad dtype) is a usage error, not a failure.
void as_usage(const std::string& option, const std::function<void()>& convert);

// --kernel NAME of precompile, verify and bench: throws UsageError listing the known families
// unless `name` is "auto" or one of them.
void check_kernel_option(const std::string& name);

// "500M", "2G", "1.5GiB", "4096", "64K" (binary units, case-insensitive, optional B/iB).
uint64_t parse_size(const std::string& text);
// "7d", "12h", "30m", "45s", "2w"; a bare number is seconds.
std::chrono::seconds parse_duration(const std::string& text);
// Splits on `separator`, dropping empty items and surrounding blanks.
std::vector<std::string> split_list(const std::string& text, char separator = ',');

std::string human_bytes(uint64_t bytes);      // "1.5 MiB"
std::string human_seconds(double seconds);    // "850 ms", "12.3 s", "4m05s"
std::string format_unix_time(int64_t unix_seconds);  // local "2026-11-29 14:03", "-" for 0

bool stderr_is_terminal();

// Columns aligned by width; columns flagged numeric are right-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> headers, std::vector<bool> right_aligned = {});
  void add_row(std::vector<std::string> row);
  void print(std::FILE* out) const;
  size_t rows() const { return rows_.size(); }

 private:
  std::vector<std::string> headers_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

// Writes `text` to `path`, throwing Error(kIoError) naming the path on failure.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace mlajit::cli
