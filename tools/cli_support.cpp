#include "cli_support.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>

#include <fmt/format.h>

#include "mlajit/error.h"
#include "mlajit/runtime.h"

namespace mlajit::cli {
namespace {

std::string lower(std::string text) {
  for (auto& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string trim(const std::string& text) {
  const auto begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  const auto end = text.find_last_not_of(" \t");
  return text.substr(begin, end - begin + 1);
}

// Splits "1.5GiB" into 1.5 and "gib"; false when there is no leading number.
bool split_number(const std::string& text, double* number, std::string* unit) {
  const std::string trimmed = trim(text);
  size_t digits = 0;
  while (digits < trimmed.size() &&
         (std::isdigit(static_cast<unsigned char>(trimmed[digits])) || trimmed[digits] == '.')) {
    ++digits;
  }
  const auto number_end = trimmed.begin() + static_cast<std::ptrdiff_t>(digits);
  if (std::count(trimmed.begin(), number_end, '.') > 1) return false;
  if (std::none_of(trimmed.begin(), number_end, [](char c) { return c >= '0' && c <= '9'; })) {
    return false;  // "" or "."
  }
  // strtod, not stod: a number too large for a double becomes HUGE_VAL (then "too large")
  // where stod would throw out_of_range.
  *number = std::strtod(trimmed.substr(0, digits).c_str(), nullptr);
  *unit = lower(trim(trimmed.substr(digits)));
  return true;
}

}  // namespace

void as_usage(const std::string& option, const std::function<void()>& convert) {
  try {
    convert();
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kInvalidArgument) throw;
    throw UsageError(fmt::format("{}: {}", option, e.what()));
  }
}

void check_kernel_option(const std::string& name) {
  as_usage("--kernel", [&] {
    if (name != MlaOptions{}.kernel) kernel_family(name);  // not "auto": a family, or the list
  });
}

uint64_t parse_size(const std::string& text) {
  double number = 0;
  std::string unit;
  const bool ok = split_number(text, &number, &unit);
  static const std::vector<std::pair<std::string, int>> kUnits{
      {"", 0}, {"b", 0}, {"k", 1}, {"kb", 1}, {"kib", 1}, {"m", 2}, {"mb", 2}, {"mib", 2},
      {"g", 3}, {"gb", 3}, {"gib", 3}, {"t", 4}, {"tb", 4}, {"tib", 4}};
  const auto it = std::find_if(kUnits.begin(), kUnits.end(),
                               [&](const auto& entry) { return entry.first == unit; });
  if (!ok || it == kUnits.end()) {
    throw UsageError(fmt::format(
        "'{}' is not a size: expected a number with an optional unit K, M, G or T (e.g. 500M, 2G)",
        text));
  }
  const double bytes = number * std::pow(1024.0, it->second);
  if (bytes >= 1.8e19) throw UsageError(fmt::format("size '{}' is too large", text));
  return static_cast<uint64_t>(bytes);
}

std::chrono::seconds parse_duration(const std::string& text) {
  double number = 0;
  std::string unit;
  const bool ok = split_number(text, &number, &unit);
  static const std::vector<std::pair<std::string, double>> kUnits{
      {"", 1}, {"s", 1}, {"m", 60}, {"min", 60}, {"h", 3600}, {"d", 86400}, {"w", 604800}};
  const auto it = std::find_if(kUnits.begin(), kUnits.end(),
                               [&](const auto& entry) { return entry.first == unit; });
  if (!ok || it == kUnits.end()) {
    throw UsageError(fmt::format(
        "'{}' is not a duration: expected a number with a unit s, m, h, d or w (e.g. 7d, 12h)",
        text));
  }
  // A century is the most a cache age can sensibly be; beyond it the seconds would overflow the
  // nanosecond clock arithmetic of the prune.
  constexpr double kMaxSeconds = 100.0 * 366 * 86400;
  const double seconds = number * it->second;
  if (seconds > kMaxSeconds) {
    throw UsageError(fmt::format("duration '{}' is too long: at most 100 years (36600d)", text));
  }
  return std::chrono::seconds(static_cast<int64_t>(std::llround(seconds)));
}

std::vector<std::string> split_list(const std::string& text, char separator) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    auto end = text.find(separator, start);
    if (end == std::string::npos) end = text.size();
    std::string item = trim(text.substr(start, end - start));
    if (!item.empty()) items.push_back(std::move(item));
    start = end + 1;
  }
  return items;
}

std::string human_bytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, kUnits[unit]);
}

std::string human_seconds(double seconds) {
  if (seconds < 1) return fmt::format("{:.0f} ms", seconds * 1e3);
  if (seconds < 60) return fmt::format("{:.1f} s", seconds);
  const auto whole = static_cast<int64_t>(seconds);
  return fmt::format("{}m{:02d}s", whole / 60, static_cast<int>(whole % 60));
}

std::string format_unix_time(int64_t unix_seconds) {
  if (unix_seconds <= 0) return "-";
  const std::time_t time = static_cast<std::time_t>(unix_seconds);
  std::tm local{};
  localtime_r(&time, &local);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d %H:%M", &local);
  return buffer;
}

bool stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

Table::Table(std::vector<std::string> headers, std::vector<bool> right_aligned)
    : headers_(std::move(headers)), right_(std::move(right_aligned)) {
  right_.resize(headers_.size(), false);
}

void Table::add_row(std::vector<std::string> row) {
  row.resize(headers_.size());
  rows_.push_back(std::move(row));
}

void Table::print(std::FILE* out) const {
  std::vector<size_t> widths(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) widths[c] = headers_[c].size();
  for (const auto& row : rows_) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  auto print_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(widths[c] - row[c].size(), ' ');
      if (c > 0) line += "  ";
      line += right_[c] ? pad + row[c] : (c + 1 < row.size() ? row[c] + pad : row[c]);
    }
    std::fprintf(out, "%s\n", line.c_str());
  };
  print_row(headers_);
  for (const auto& row : rows_) print_row(row);
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) throw Error(ErrorCode::kIoError, fmt::format("cannot write '{}'", path));
}

}  // namespace mlajit::cli
