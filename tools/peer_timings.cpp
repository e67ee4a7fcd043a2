#include "peer_timings.h"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "cli_support.h"
#include "csv.h"
#include "embedded_data.h"
#include "mlajit/error.h"

namespace mlajit::cli {
namespace {

constexpr const char* kFile = "peer_timings_h200.csv";
// The columns read, by their names in baseline.md; the table's other columns are kept in the
// file for the record.
constexpr const char* kShape = "shape";
constexpr const char* kFa2 = "FI-FA2 µs";
constexpr const char* kFa3 = "FI-FA3 µs";
constexpr const char* kFlashMla = "FlashMLA µs";

[[noreturn]] void bad_shape(const std::string& text) {
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("shape '{}' is not H,B,L,page[,q_len,causal] (heads 1..128, batch >= 1, "
                          "kv_len >= 0, page >= 1, q_len >= 1, causal 0 or 1; e.g. 128,64,4096,64) "
                          "or ragged:H,B,MIN_KV,MAX_KV,SEED or topk:H,B,K,CACHE (K <= CACHE)",
                          text));
}

std::vector<long long> numbers(const std::string& text, const std::string& whole) {
  std::vector<long long> values;
  for (const std::string& part : split_list(text, ',')) {
    try {
      size_t used = 0;
      values.push_back(std::stoll(part, &used));
      if (used != part.size()) bad_shape(whole);
    } catch (const std::logic_error&) {  // invalid_argument, out_of_range
      bad_shape(whole);
    }
  }
  return values;
}

std::optional<double> microseconds(const std::string& text, const std::string& column) {
  if (text.empty()) return std::nullopt;
  try {
    size_t used = 0;
    const double value = std::stod(text, &used);
    if (used == text.size() && value > 0) return value;
  } catch (const std::logic_error&) {
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("{} '{}' is not a positive number of µs", column, text));
}

size_t column_of(const std::vector<std::string>& header, const char* name) {
  const auto it = std::find(header.begin(), header.end(), name);
  if (it == header.end()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("no column '{}'", name));
  }
  return static_cast<size_t>(it - header.begin());
}

std::vector<PeerRow> read_rows() {
  const auto records = parse_csv(embedded_data_files().at(kFile));
  if (records.empty()) throw Error(ErrorCode::kInvalidArgument, "no header");
  const auto& header = records.front();
  const size_t shape = column_of(header, kShape), fa2 = column_of(header, kFa2),
               fa3 = column_of(header, kFa3), flashmla = column_of(header, kFlashMla);
  std::vector<PeerRow> rows;
  for (size_t r = 1; r < records.size(); ++r) {
    const auto& fields = records[r];
    if (fields.size() != header.size()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("record {} has {} fields, the header {}", r, fields.size(),
                              header.size()));
    }
    PeerRow row;
    row.shape_text = fields[shape];
    row.shape = parse_bench_shape(fields[shape]);
    row.timings.fa2_us = microseconds(fields[fa2], kFa2);
    row.timings.fa3_us = microseconds(fields[fa3], kFa3);
    row.timings.flashmla_us = microseconds(fields[flashmla], kFlashMla);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<int> kv_lens_of(const MlaBenchShape& shape) {
  if (!shape.ragged_kv_lens.empty()) return shape.ragged_kv_lens;
  return std::vector<int>(shape.batch, shape.kv_len);
}

bool same_problem(const MlaBenchShape& a, const MlaBenchShape& b) {
  return a.num_heads == b.num_heads && a.page_size == b.page_size && a.q_len == b.q_len &&
         a.causal == b.causal && a.dtype == b.dtype &&
         a.kv_dtype.value_or(a.dtype) == b.kv_dtype.value_or(b.dtype) &&
         a.kv_scales == b.kv_scales && a.force_tier == b.force_tier &&
         a.topk_cache_tokens == b.topk_cache_tokens && kv_lens_of(a) == kv_lens_of(b);
}

}  // namespace

MlaBenchShape parse_bench_shape(const std::string& text) {
  const std::string ragged = "ragged:";
  if (text.rfind(ragged, 0) == 0) {
    const auto v = numbers(text.substr(ragged.size()), text);
    if (v.size() != 5 || v[0] < 1 || v[0] > 128 || v[1] < 1 || v[2] < 0 || v[3] < v[2] ||
        v[4] < 0 || v[4] > UINT32_MAX) {
      bad_shape(text);
    }
    return ragged_bench_shape(static_cast<int>(v[0]), static_cast<int>(v[1]),
                              static_cast<int>(v[2]), static_cast<int>(v[3]),
                              static_cast<uint32_t>(v[4]));
  }
  const std::string top_k = "topk:";
  if (text.rfind(top_k, 0) == 0) {
    const auto v = numbers(text.substr(top_k.size()), text);
    if (v.size() != 4 || v[0] < 1 || v[0] > 128 || v[1] < 1 || v[2] < 1 || v[3] < v[2] ||
        v[3] > INT32_MAX) {
      bad_shape(text);
    }
    return top_k_bench_shape(static_cast<int>(v[0]), static_cast<int>(v[1]),
                             static_cast<int>(v[2]), static_cast<int>(v[3]));
  }
  const auto v = numbers(text, text);
  const bool ok = (v.size() == 4 || v.size() == 6) && v[0] >= 1 && v[0] <= 128 && v[1] >= 1 &&
                  v[2] >= 0 && v[3] >= 1 && (v.size() == 4 || (v[4] >= 1 && v[5] >= 0 && v[5] <= 1));
  if (!ok) bad_shape(text);
  MlaBenchShape shape;
  shape.num_heads = static_cast<int>(v[0]);
  shape.batch = static_cast<int>(v[1]);
  shape.kv_len = static_cast<int>(v[2]);
  shape.page_size = static_cast<int>(v[3]);
  if (v.size() == 6) {
    shape.q_len = static_cast<int>(v[4]);
    shape.causal = v[5] != 0;
  }
  return shape;
}

const std::vector<PeerRow>& peer_rows() {
  static const std::vector<PeerRow> rows = [] {
    try {
      return read_rows();
    } catch (const Error& e) {
      throw Error(ErrorCode::kInternal, fmt::format("the embedded {}: {}", kFile, e.what()));
    }
  }();
  return rows;
}

PeerTimings peer_timings_for(const MlaBenchShape& shape) {
  for (const PeerRow& row : peer_rows()) {
    if (same_problem(row.shape, shape)) return row.timings;
  }
  return {};
}

}  // namespace mlajit::cli
