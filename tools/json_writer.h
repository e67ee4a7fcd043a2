#pragma once
// A tiny JSON value and writer for the CLI's --json output (no dependency beyond the standard
// library). Objects keep insertion order so the output reads in the order it was built.
// Layout: objects one key per line; arrays of scalars on one line; arrays of objects as
// `[ {` ... `}, {` ... `} ]`, so that line-based tools can find e.g. `"gpus": [ {`.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace mlajit::cli {

class Json {
 public:
  Json() = default;  // null
  Json(bool value) : kind_(Kind::kBool), bool_(value) {}
  template <typename T, typename = std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>>
  Json(T value) : kind_(Kind::kNumber), text_(std::to_string(value)) {}
  Json(double value) : kind_(Kind::kNumber), text_(number_text(value)) {
    if (!std::isfinite(value)) kind_ = Kind::kNull;  // JSON has no NaN or infinity
  }
  Json(const char* value) : kind_(Kind::kString), text_(value ? value : "") {}
  Json(std::string value) : kind_(Kind::kString), text_(std::move(value)) {}

  static Json array() { Json json; json.kind_ = Kind::kArray; return json; }
  static Json object() { Json json; json.kind_ = Kind::kObject; return json; }

  // Appends to an array.
  Json& push(Json value) {
    items_.emplace_back(std::string(), std::move(value));
    return *this;
  }
  // Adds a key to an object (no check for duplicates: callers build each key once).
  Json& set(std::string key, Json value) {
    items_.emplace_back(std::move(key), std::move(value));
    return *this;
  }
  bool empty() const { return items_.empty(); }

  std::string dump() const {
    std::string out;
    write(out, 0);
    return out;
  }

  // "..." with JSON escapes; bytes that are not valid UTF-8 become U+FFFD.
  static std::string quote(const std::string& text) {
    std::string out = "\"";
    for (size_t i = 0; i < text.size();) {
      const auto c = static_cast<unsigned char>(text[i]);
      if (c >= 0x80) {
        const size_t length = utf8_sequence_length(text, i);
        if (length == 0) {
          out += "\\ufffd";
          ++i;
        } else {
          out.append(text, i, length);
          i += length;
        }
        continue;
      }
      out += escape_ascii(c);
      ++i;
    }
    return out + "\"";
  }

 private:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  // The shortest %g form that reads back exactly (0.1 rather than 0.10000000000000001).
  static std::string number_text(double value) {
    char buffer[32];
    for (int precision = 6; precision <= 17; ++precision) {
      std::snprintf(buffer, sizeof buffer, "%.*g", precision, value);
      if (std::strtod(buffer, nullptr) == value) break;
    }
    return buffer;
  }

  static std::string escape_ascii(unsigned char c) {
    switch (c) {
      case '"': return "\\\"";
      case '\\': return "\\\\";
      case '\n': return "\\n";
      case '\r': return "\\r";
      case '\t': return "\\t";
      case '\b': return "\\b";
      case '\f': return "\\f";
      default: break;
    }
    if (c < 0x20 || c == 0x7f) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
      return buffer;
    }
    return std::string(1, static_cast<char>(c));
  }

  // Length of the well-formed UTF-8 sequence starting at text[i], 0 when it is not one.
  static size_t utf8_sequence_length(const std::string& text, size_t i) {
    const auto lead = static_cast<unsigned char>(text[i]);
    size_t length = lead >= 0xf0 && lead <= 0xf4 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc2 && lead < 0xe0 ? 2 : 0;
    if (length == 0 || i + length > text.size()) return 0;
    for (size_t k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) return 0;
    }
    return length;
  }

  bool is_container() const { return kind_ == Kind::kArray || kind_ == Kind::kObject; }

  void write(std::string& out, int indent) const {
    switch (kind_) {
      case Kind::kNull: out += "null"; return;
      case Kind::kBool: out += bool_ ? "true" : "false"; return;
      case Kind::kNumber: out += text_; return;
      case Kind::kString: out += quote(text_); return;
      case Kind::kArray: write_array(out, indent); return;
      case Kind::kObject: write_object(out, indent); return;
    }
  }

  void write_object(std::string& out, int indent) const {
    if (items_.empty()) {
      out += "{}";
      return;
    }
    out += "{\n";
    for (size_t i = 0; i < items_.size(); ++i) {
      out.append(indent + 2, ' ');
      out += quote(items_[i].first) + ": ";
      items_[i].second.write(out, indent + 2);
      out += i + 1 < items_.size() ? ",\n" : "\n";
    }
    out.append(indent, ' ');
    out += "}";
  }

  void write_array(std::string& out, int indent) const {
    if (items_.empty()) {
      out += "[]";
      return;
    }
    bool nested = false;
    for (const auto& item : items_) nested = nested || item.second.is_container();
    out += nested ? "[ " : "[";
    for (size_t i = 0; i < items_.size(); ++i) {
      if (i > 0) out += ", ";
      items_[i].second.write(out, indent);
    }
    out += nested ? " ]" : "]";
  }

  Kind kind_ = Kind::kNull;
  bool bool_ = false;
  std::string text_;
  std::vector<std::pair<std::string, Json>> items_;
};

}  // namespace mlajit::cli
