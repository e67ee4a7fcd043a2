#pragma once
// The wire format between the library and its compiler helper process (one socket: requests
// in, answers out). Everything is a frame: a 4-byte tag, a u64 payload length, the payload.
// Numbers are in native byte order (both ends are one build on one machine); strings are a
// u64 length and the bytes.
//   helper -> library  HELO  once at start: protocol version, pid, NVRTC version (0 when it
//                            could not load), the NVRTC library path or the reason it failed
//   library -> helper  CMPL  a CompileRequest
//   helper -> library  RSLT  a CompileResult                      } one of the two answers
//                      FAIL  an ErrorCode and message (the log)    } each CMPL
// The library keeps the helper for the next CMPL; the helper exits at end of input. Decoding
// is bounds-checked throughout: a truncated or garbled frame is an Error, never a crash, and
// no length read from the wire is allocated before it is checked against the limits below.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "jit/nvrtc_compiler.h"
#include "mlajit/error.h"

namespace mlajit::jit::helper {

constexpr uint32_t kProtocolVersion = 1;
// Far above any cubin or kernel source (the MLA cubins are ~60 KB, sources ~100 KB), far
// below what a garbled length could make us allocate.
constexpr uint64_t kMaxFrameBytes = uint64_t(256) << 20;
constexpr size_t kFrameHeaderBytes = 12;

enum class Tag : uint32_t {
  kHello = 0x4f4c4548,    // "HELO"
  kCompile = 0x4c504d43,  // "CMPL"
  kResult = 0x544c5352,   // "RSLT"
  kFailure = 0x4c494146,  // "FAIL"
};

struct Frame {
  Tag tag;
  std::string payload;
};

struct Hello {
  uint32_t protocol_version = kProtocolVersion;
  int64_t pid = 0;
  int nvrtc_version = 0;     // 0: NVRTC did not load in the helper
  std::string nvrtc_detail;  // the library path, or why it did not load
};

struct Failure {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
};

std::string encode_frame(Tag tag, const std::string& payload);

// Takes one whole frame off the front of `buffer`: nullopt while more bytes are needed.
// Throws Error(kInternal) naming the problem for an unknown tag or a length over the limit.
std::optional<Frame> take_frame(std::string& buffer);

std::string encode_hello(const Hello& hello);
std::string encode_request(const CompileRequest& request);
std::string encode_result(const CompileResult& result);
std::string encode_failure(const Failure& failure);

// Each throws Error(kInternal) saying what was short or out of range; the payload must be
// consumed exactly.
Hello decode_hello(const std::string& payload);
CompileRequest decode_request(const std::string& payload);
CompileResult decode_result(const std::string& payload);
Failure decode_failure(const std::string& payload);

std::string tag_name(uint32_t tag);  // "RSLT", or hex for bytes that are not a tag

}  // namespace mlajit::jit::helper
