// KernelSpec's canonical text and its strict parser. The text is hashed into cache keys, so
// parse() accepts exactly what text() writes: every field once, in any order after the
// family, with no defaults filled in silently. The optional fields (kv_scales, rows) are
// written only when they differ from their default, and so are refused when they name it.
#include "mlajit/kernel_spec.h"

#include <cctype>
#include <climits>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "mlajit/error.h"

namespace mlajit {

const char* dtype_name(DType dtype) noexcept {
  switch (dtype) {
    case DType::kFloat16: return "f16";
    case DType::kBFloat16: return "bf16";
    case DType::kFloat8E4M3: return "e4m3";
  }
  return "unknown";
}

DType parse_dtype(const std::string& text) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat8E4M3}) {
    if (text == dtype_name(dtype)) return dtype;
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("unknown dtype '{}': expected f16, bf16 or e4m3", text));
}

int dtype_size(DType dtype) noexcept {
  switch (dtype) {
    case DType::kFloat16:
    case DType::kBFloat16: return 2;
    case DType::kFloat8E4M3: return 1;
  }
  return 0;
}

const char* kv_scales_name(KvScales scales) noexcept {
  switch (scales) {
    case KvScales::kPerTensor: return "tensor";
    case KvScales::kPerToken128: return "token128";
  }
  return "unknown";
}

KvScales parse_kv_scales(const std::string& text) {
  for (KvScales scales : {KvScales::kPerTensor, KvScales::kPerToken128}) {
    if (text == kv_scales_name(scales)) return scales;
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("unknown KV scales '{}': expected tensor or token128", text));
}

bool TileConfig::operator==(const TileConfig& other) const {
  return num_stages == other.num_stages && kv_tile == other.kv_tile &&
         qk_shard == other.qk_shard && q_tile == other.q_tile;
}

std::string KernelSpec::text() const {
  const std::string scales =
      kv_scales == KvScales::kPerTensor ? "" : fmt::format(";kv_scales={}", kv_scales_name(kv_scales));
  return fmt::format(
      "{};q={};kv={}{};o={};ckv={};kpe={};stages={};kv_tile={};qk_shard={};q_tile={}{};arch={}",
      family, dtype_name(q_dtype), dtype_name(kv_dtype), scales, dtype_name(o_dtype), head_dim_ckv,
      head_dim_kpe, tile.num_stages, tile.kv_tile, tile.qk_shard ? 1 : 0,
      tile.q_tile, wide_rows_only ? ";rows=wide" : "", arch);
}

namespace {

const std::vector<std::string>& field_names() {
  static const std::vector<std::string> names = {
      "q", "kv", "o", "ckv", "kpe", "stages", "kv_tile", "qk_shard", "q_tile", "arch"};
  return names;
}

// Fields text() writes only when they differ from their default.
const std::vector<std::string>& optional_field_names() {
  static const std::vector<std::string> names = {"kv_scales", "rows"};
  return names;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

[[noreturn]] void bad_field(const std::string& field, const std::string& value,
                            const std::string& expected, const std::string& text) {
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("kernel spec field '{}' has bad value '{}': expected {} (in \"{}\")",
                          field, value, expected, text));
}

// A positive decimal integer without sign, spaces or leading zeros: the form text() writes.
int parse_positive(const std::string& field, const std::string& value, const std::string& text) {
  const bool digits = !value.empty() && value.size() <= 9 && value[0] != '0' &&
                      value.find_first_not_of("0123456789") == std::string::npos;
  if (!digits) bad_field(field, value, "a positive decimal integer", text);
  return std::stoi(value);
}

bool parse_flag(const std::string& field, const std::string& value, const std::string& text) {
  if (value == "0") return false;
  if (value == "1") return true;
  bad_field(field, value, "0 or 1", text);
}

DType parse_dtype_field(const std::string& field, const std::string& value,
                        const std::string& text) {
  try {
    return parse_dtype(value);
  } catch (const Error&) {
    bad_field(field, value, "f16, bf16 or e4m3", text);
  }
}

// sm_XX, sm_XXa, sm_XXf, compute_XX (+a/f): what NVRTC's --gpu-architecture takes.
bool is_arch_text(const std::string& value) {
  std::string rest;
  if (value.rfind("sm_", 0) == 0) rest = value.substr(3);
  else if (value.rfind("compute_", 0) == 0) rest = value.substr(8);
  else return false;
  if (!rest.empty() && (rest.back() == 'a' || rest.back() == 'f')) rest.pop_back();
  return rest.size() >= 2 && rest.size() <= 3 &&
         rest.find_first_not_of("0123456789") == std::string::npos;
}

bool is_family_text(const std::string& value) {
  if (value.empty()) return false;
  for (char c : value) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '_')) {
      return false;
    }
  }
  return true;
}

std::map<std::string, std::string> collect_fields(const std::vector<std::string>& parts,
                                                  const std::string& text) {
  std::map<std::string, std::string> fields;
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t equals = parts[i].find('=');
    if (equals == std::string::npos) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("kernel spec part '{}' is not key=value (in \"{}\")", parts[i], text));
    }
    const std::string key = parts[i].substr(0, equals);
    const std::string value = parts[i].substr(equals + 1);
    if (key == "causal") {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("kernel spec field 'causal' no longer exists: the causal mask is a "
                              "run-time value (MlaShape::causal) and one cubin serves both; drop "
                              "the field (in \"{}\")",
                              text));
    }
    bool known = false;
    for (const auto& name : field_names()) known = known || name == key;
    for (const auto& name : optional_field_names()) known = known || name == key;
    if (!known) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("unknown kernel spec field '{}' (value '{}'); known fields: {}, {} "
                              "(in \"{}\")",
                              key, value, fmt::join(field_names(), ", "),
                              fmt::join(optional_field_names(), ", "), text));
    }
    if (!fields.emplace(key, value).second) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("kernel spec field '{}' appears twice ('{}' and '{}') in \"{}\"", key,
                              fields[key], value, text));
    }
  }
  for (const auto& name : field_names()) {
    if (!fields.count(name)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("kernel spec field '{}' is missing in \"{}\"", name, text));
    }
  }
  return fields;
}

}  // namespace

KernelSpec KernelSpec::parse(const std::string& text) {
  const std::vector<std::string> parts = split(text, ';');
  if (!is_family_text(parts[0])) {
    bad_field("family", parts[0], "a kernel family name such as portable ([a-z0-9_]+)", text);
  }
  std::map<std::string, std::string> fields = collect_fields(parts, text);
  KernelSpec spec;
  spec.family = parts[0];
  spec.q_dtype = parse_dtype_field("q", fields["q"], text);
  spec.kv_dtype = parse_dtype_field("kv", fields["kv"], text);
  spec.o_dtype = parse_dtype_field("o", fields["o"], text);
  if (fields.count("kv_scales")) {
    const std::string& value = fields["kv_scales"];
    if (value != kv_scales_name(KvScales::kPerToken128)) {
      bad_field("kv_scales", value, "token128 (per-tensor scales are written by leaving the field out)",
                text);
    }
    spec.kv_scales = KvScales::kPerToken128;
  }
  spec.head_dim_ckv = parse_positive("ckv", fields["ckv"], text);
  spec.head_dim_kpe = parse_positive("kpe", fields["kpe"], text);
  spec.tile.num_stages = parse_positive("stages", fields["stages"], text);
  spec.tile.kv_tile = parse_positive("kv_tile", fields["kv_tile"], text);
  spec.tile.qk_shard = parse_flag("qk_shard", fields["qk_shard"], text);
  spec.tile.q_tile = parse_positive("q_tile", fields["q_tile"], text);
  if (fields.count("rows")) {
    if (fields["rows"] != "wide") {
      bad_field("rows", fields["rows"], "wide (a kernel for tiles of any row count is written by "
                "leaving the field out)", text);
    }
    spec.wide_rows_only = true;
  }
  if (!is_arch_text(fields["arch"])) {
    bad_field("arch", fields["arch"], "sm_XX, sm_XXa, sm_XXf or compute_XX (e.g. sm_90a)", text);
  }
  spec.arch = fields["arch"];
  return spec;
}

}  // namespace mlajit
