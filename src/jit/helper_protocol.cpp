// Encoding and bounds-checked decoding of the compiler helper's frames.
#include "jit/helper_protocol.h"

#include <cstring>
#include <type_traits>

#include <fmt/format.h>

namespace mlajit::jit::helper {
namespace {

// Element counts (headers, options) above this are garbage, not programs.
constexpr uint64_t kMaxItems = 1 << 16;

class Writer {
 public:
  template <typename T>
  Writer& number(T value) {
    static_assert(std::is_arithmetic_v<T>);
    unsigned char bytes[sizeof(T)];
    std::memcpy(bytes, &value, sizeof(T));  // native order: both ends are one build
    out_.append(reinterpret_cast<const char*>(bytes), sizeof(T));
    return *this;
  }
  Writer& text(const std::string& value) {
    number<uint64_t>(value.size());
    out_ += value;
    return *this;
  }
  Writer& bytes(const std::vector<uint8_t>& value) {
    number<uint64_t>(value.size());
    out_.append(reinterpret_cast<const char*>(value.data()), value.size());
    return *this;
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  Reader(const std::string& payload, const char* what) : data_(payload), what_(what) {}

  template <typename T>
  T number(const char* field) {
    need(sizeof(T), field);
    T value;
    std::memcpy(&value, data_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  std::string text(const char* field) {
    const uint64_t size = number<uint64_t>(field);
    need(size, field);
    std::string value = data_.substr(at_, size);
    at_ += size;
    return value;
  }
  std::vector<uint8_t> bytes(const char* field) {
    const std::string value = text(field);
    return std::vector<uint8_t>(value.begin(), value.end());
  }
  uint64_t count(const char* field) {
    const uint64_t value = number<uint64_t>(field);
    if (value > kMaxItems) throw bad(fmt::format("{} count {} is over {}", field, value, kMaxItems));
    return value;
  }
  void finish() const {
    if (at_ != data_.size()) {
      throw bad(fmt::format("{} bytes left over after the last field", data_.size() - at_));
    }
  }
  Error bad(const std::string& why) const {
    return Error(ErrorCode::kInternal, fmt::format("garbled {} from the compiler helper protocol: {}",
                                                   what_, why));
  }

 private:
  void need(uint64_t size, const char* field) const {
    if (size > data_.size() - at_) {
      throw bad(fmt::format("{} needs {} bytes at offset {}, {} remain", field, size, at_,
                            data_.size() - at_));
    }
  }
  const std::string& data_;
  const char* what_;
  size_t at_ = 0;
};

bool known_tag(uint32_t tag) {
  switch (static_cast<Tag>(tag)) {
    case Tag::kHello:
    case Tag::kCompile:
    case Tag::kResult:
    case Tag::kFailure: return true;
  }
  return false;
}

}  // namespace

std::string tag_name(uint32_t tag) {
  if (known_tag(tag)) {
    char name[5] = {};
    std::memcpy(name, &tag, 4);
    return name;
  }
  return fmt::format("0x{:08x}", tag);
}

std::string encode_frame(Tag tag, const std::string& payload) {
  Writer writer;
  writer.number(static_cast<uint32_t>(tag)).number<uint64_t>(payload.size());
  return writer.take() + payload;
}

std::optional<Frame> take_frame(std::string& buffer) {
  if (buffer.size() < kFrameHeaderBytes) return std::nullopt;
  uint32_t tag = 0;
  uint64_t size = 0;
  std::memcpy(&tag, buffer.data(), 4);
  std::memcpy(&size, buffer.data() + 4, 8);
  if (!known_tag(tag)) {
    throw Error(ErrorCode::kInternal,
                fmt::format("garbled frame from the compiler helper protocol: unknown tag {}",
                            tag_name(tag)));
  }
  if (size > kMaxFrameBytes) {
    throw Error(ErrorCode::kInternal,
                fmt::format("garbled frame from the compiler helper protocol: {} frame of {} "
                            "bytes is over the {}-byte limit",
                            tag_name(tag), size, kMaxFrameBytes));
  }
  if (buffer.size() - kFrameHeaderBytes < size) return std::nullopt;
  Frame frame{static_cast<Tag>(tag), buffer.substr(kFrameHeaderBytes, size)};
  buffer.erase(0, kFrameHeaderBytes + size);
  return frame;
}

std::string encode_hello(const Hello& hello) {
  return Writer()
      .number(hello.protocol_version)
      .number(hello.pid)
      .number<int32_t>(hello.nvrtc_version)
      .text(hello.nvrtc_detail)
      .take();
}

Hello decode_hello(const std::string& payload) {
  Reader reader(payload, "HELO");
  Hello hello;
  hello.protocol_version = reader.number<uint32_t>("protocol version");
  if (hello.protocol_version != kProtocolVersion) {
    // Nothing after the version is read: another version may lay it out differently.
    throw reader.bad(fmt::format("protocol version {}, this library speaks {} (a helper of "
                                 "another mlajit version?)",
                                 hello.protocol_version, kProtocolVersion));
  }
  hello.pid = reader.number<int64_t>("pid");
  hello.nvrtc_version = reader.number<int32_t>("NVRTC version");
  hello.nvrtc_detail = reader.text("NVRTC detail");
  reader.finish();
  return hello;
}

std::string encode_request(const CompileRequest& request) {
  Writer writer;
  writer.text(request.program_name).text(request.source).number<uint64_t>(request.headers.size());
  for (const auto& [name, contents] : request.headers) writer.text(name).text(contents);
  writer.text(request.name_expression).text(request.arch);
  writer.number<uint64_t>(request.extra_options.size());
  for (const auto& option : request.extra_options) writer.text(option);
  writer.number(request.random_seed);
  return writer.take();
}

CompileRequest decode_request(const std::string& payload) {
  Reader reader(payload, "CMPL");
  CompileRequest request;
  request.program_name = reader.text("program name");
  request.source = reader.text("source");
  for (uint64_t i = 0, n = reader.count("headers"); i < n; ++i) {
    std::string name = reader.text("header name");
    request.headers[name] = reader.text("header contents");
  }
  request.name_expression = reader.text("name expression");
  request.arch = reader.text("arch");
  for (uint64_t i = 0, n = reader.count("options"); i < n; ++i) {
    request.extra_options.push_back(reader.text("option"));
  }
  request.random_seed = reader.number<uint64_t>("random seed");
  reader.finish();
  return request;
}

std::string encode_result(const CompileResult& result) {
  Writer writer;
  writer.bytes(result.image).number<uint8_t>(result.is_ptx ? 1 : 0);
  writer.text(result.lowered_name).text(result.log).number<uint64_t>(result.options.size());
  for (const auto& option : result.options) writer.text(option);
  writer.number(result.seconds);
  return writer.take();
}

CompileResult decode_result(const std::string& payload) {
  Reader reader(payload, "RSLT");
  CompileResult result;
  result.image = reader.bytes("image");
  const uint8_t is_ptx = reader.number<uint8_t>("is_ptx");
  if (is_ptx > 1) throw reader.bad(fmt::format("is_ptx={} is not 0 or 1", is_ptx));
  result.is_ptx = is_ptx == 1;
  result.lowered_name = reader.text("lowered name");
  result.log = reader.text("log");
  for (uint64_t i = 0, n = reader.count("options"); i < n; ++i) {
    result.options.push_back(reader.text("option"));
  }
  result.seconds = reader.number<double>("seconds");
  reader.finish();
  if (result.image.empty()) throw reader.bad("the image is empty");
  return result;
}

std::string encode_failure(const Failure& failure) {
  return Writer().number<int32_t>(static_cast<int32_t>(failure.code)).text(failure.message).take();
}

Failure decode_failure(const std::string& payload) {
  Reader reader(payload, "FAIL");
  Failure failure;
  const int32_t code = reader.number<int32_t>("error code");
  if (code < static_cast<int32_t>(ErrorCode::kInvalidArgument) ||
      code > static_cast<int32_t>(ErrorCode::kInternal)) {
    throw reader.bad(fmt::format("error code {} is not an ErrorCode", code));
  }
  failure.code = static_cast<ErrorCode>(code);
  failure.message = reader.text("message");
  reader.finish();
  return failure;
}

}  // namespace mlajit::jit::helper
