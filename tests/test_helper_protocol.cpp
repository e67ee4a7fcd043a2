// The compiler helper's wire format and the isolation options, without any process: every
// frame round-trips, and truncated, damaged or hostile bytes are an Error, never a crash or an
// unbounded allocation (ASan/UBSan run this file in CI).
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <csignal>
#include <cstring>
#include <random>
#include <string>

#include "kernel_dir_copy.h"
#include "jit/child_process.h"
#include "jit/helper_protocol.h"
#include "jit/isolation_options.h"
#include "mlajit/error.h"

using mlajit::CompileMode;
using mlajit::Error;
using mlajit::ErrorCode;
using mlajit::test::ScopedEnv;
using namespace mlajit::jit;
using namespace mlajit::jit::helper;

namespace {

CompileRequest sample_request() {
  CompileRequest request;
  request.program_name = "sample.cu";
  request.source = std::string("#include \"a.cuh\"\n\0binary-safe", 29);
  request.headers = {{"a.cuh", "#define A 1\n"}, {"b.cuh", ""}};
  request.name_expression = "ns::kernel<1>";
  request.arch = "sm_90a";
  request.extra_options = {"-DX=1", "-DY=2"};
  request.random_seed = 0x0123456789abcdefULL;
  return request;
}

CompileResult sample_result() {
  CompileResult result;
  result.image = {0x7f, 'E', 'L', 'F', 0, 1, 2, 255};
  result.lowered_name = "_Z6kernelILi1EEvv";
  result.log = "warning: something\n";
  result.options = {"--gpu-architecture=sm_90a", "-std=c++17"};
  result.seconds = 0.125;
  return result;
}

// Every way of decoding a payload of `tag`; throws what the decoder throws.
void decode_any(Tag tag, const std::string& payload) {
  switch (tag) {
    case Tag::kHello: (void)decode_hello(payload); break;
    case Tag::kCompile: (void)decode_request(payload); break;
    case Tag::kResult: (void)decode_result(payload); break;
    case Tag::kFailure: (void)decode_failure(payload); break;
  }
}

}  // namespace

TEST_CASE("every helper frame round-trips") {
  const CompileRequest request = sample_request();
  std::string stream = encode_frame(Tag::kCompile, encode_request(request));
  auto frame = take_frame(stream);
  REQUIRE(frame);
  CHECK(stream.empty());
  CHECK(frame->tag == Tag::kCompile);
  const CompileRequest back = decode_request(frame->payload);
  CHECK(back.program_name == request.program_name);
  CHECK(back.source == request.source);
  CHECK(back.headers == request.headers);
  CHECK(back.name_expression == request.name_expression);
  CHECK(back.arch == request.arch);
  CHECK(back.extra_options == request.extra_options);
  CHECK(back.random_seed == request.random_seed);

  const CompileResult result = decode_result(encode_result(sample_result()));
  CHECK(result.image == sample_result().image);
  CHECK(result.lowered_name == sample_result().lowered_name);
  CHECK(result.log == sample_result().log);
  CHECK(result.options == sample_result().options);
  CHECK(result.seconds == 0.125);
  CHECK_FALSE(result.is_ptx);

  const Failure failure = decode_failure(encode_failure({ErrorCode::kCompileError, "log"}));
  CHECK(failure.code == ErrorCode::kCompileError);
  CHECK(failure.message == "log");

  Hello hello;
  hello.pid = 1234;
  hello.nvrtc_version = 13000;
  hello.nvrtc_detail = "/usr/local/cuda/lib64/libnvrtc.so.13";
  const Hello hello_back = decode_hello(encode_hello(hello));
  CHECK(hello_back.pid == 1234);
  CHECK(hello_back.nvrtc_version == 13000);
  CHECK(hello_back.nvrtc_detail == hello.nvrtc_detail);
}

TEST_CASE("a frame arriving byte by byte is taken only when whole, then the next one") {
  const std::string bytes = encode_frame(Tag::kResult, encode_result(sample_result())) +
                            encode_frame(Tag::kFailure, encode_failure({ErrorCode::kUnsupported, "x"}));
  std::string buffer;
  std::vector<Tag> taken;
  for (char byte : bytes) {
    buffer.push_back(byte);
    while (auto frame = take_frame(buffer)) {
      decode_any(frame->tag, frame->payload);
      taken.push_back(frame->tag);
    }
  }
  CHECK(taken == std::vector<Tag>{Tag::kResult, Tag::kFailure});
  CHECK(buffer.empty());
}

TEST_CASE("every truncation of every payload is refused naming what was short") {
  const std::pair<Tag, std::string> payloads[] = {
      {Tag::kHello, encode_hello(Hello{})},
      {Tag::kCompile, encode_request(sample_request())},
      {Tag::kResult, encode_result(sample_result())},
      {Tag::kFailure, encode_failure({ErrorCode::kCompileError, "message"})},
  };
  for (const auto& [tag, payload] : payloads) {
    for (size_t length = 0; length < payload.size(); ++length) {
      INFO(tag_name(static_cast<uint32_t>(tag)) << " cut to " << length << " of " << payload.size());
      try {
        decode_any(tag, payload.substr(0, length));
        FAIL("a truncated payload was accepted");
      } catch (const Error& error) {
        CHECK(error.code() == ErrorCode::kInternal);
        CHECK(std::string(error.what()).find("garbled") != std::string::npos);
      }
    }
    INFO(tag_name(static_cast<uint32_t>(tag)) << " with a byte appended");
    CHECK_THROWS_WITH(decode_any(tag, payload + "x"), Catch::Contains("left over"));
  }
}

TEST_CASE("hostile frame headers are refused before anything is allocated") {
  std::string unknown = "JUNK" + std::string(8, '\0');
  CHECK_THROWS_WITH(take_frame(unknown), Catch::Contains("unknown tag 0x4b4e554a"));
  // A RSLT frame claiming 2^40 bytes: refused from its header, not after reading 1 TiB.
  std::string huge = encode_frame(Tag::kResult, "").substr(0, 4) + std::string("\0\0\0\0\0\1\0\0", 8);
  CHECK_THROWS_WITH(take_frame(huge), Catch::Contains("over the 268435456-byte limit"));
  // A string length of 2^62 inside a small payload.
  std::string payload = encode_result(sample_result());
  const uint64_t absurd = uint64_t(1) << 62;
  std::memcpy(payload.data(), &absurd, sizeof(absurd));
  CHECK_THROWS_WITH(decode_result(payload), Catch::Contains("image needs 4611686018427387904 bytes"));
  // A header count of 2^32.
  std::string request = encode_request(sample_request());
  CompileRequest bare;
  bare.program_name = "p";
  request = encode_request(bare);
  const size_t count_at = 8 + 1 + 8 + 0;  // program name, then the empty source
  const uint64_t many = uint64_t(1) << 32;
  std::memcpy(request.data() + count_at, &many, sizeof(many));
  CHECK_THROWS_WITH(decode_request(request), Catch::Contains("headers count 4294967296"));
  CHECK_THROWS_WITH(decode_failure(encode_failure({static_cast<ErrorCode>(99), "m"})),
                    Catch::Contains("error code 99 is not an ErrorCode"));
  Hello other;
  other.protocol_version = 2;
  CHECK_THROWS_WITH(decode_hello(encode_hello(other)), Catch::Contains("protocol version 2"));
}

TEST_CASE("random damage to an answer never crashes the decoder") {
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  const std::string good = encode_frame(Tag::kResult, encode_result(sample_result()));
  int accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string damaged = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i) damaged[rng() % damaged.size()] = static_cast<char>(rng());
    if (rng() % 4 == 0) damaged.resize(rng() % damaged.size());
    try {
      while (auto frame = take_frame(damaged)) {
        decode_any(frame->tag, frame->payload);
        ++accepted;
      }
    } catch (const Error& error) {
      REQUIRE(error.code() == ErrorCode::kInternal);
    }
  }
  // Flips inside the image or the log keep a frame valid: some damage is accepted, which is
  // why the cache entry's own checksum, not this framing, guards the stored bytes.
  CHECK(accepted > 0);
}

TEST_CASE("compile modes and time limits parse, and bad values name the variable") {
  CHECK(parse_compile_mode("", "M") == CompileMode::kAuto);
  CHECK(parse_compile_mode("auto", "M") == CompileMode::kAuto);
  CHECK(parse_compile_mode("Process", "M") == CompileMode::kProcess);
  CHECK(parse_compile_mode("INLINE", "M") == CompileMode::kInline);
  CHECK_THROWS_WITH(parse_compile_mode("fork", "MLAJIT_COMPILE_MODE"),
                    Catch::Contains("MLAJIT_COMPILE_MODE=\"fork\" is not a compile mode") &&
                        Catch::Contains("process"));
  using std::chrono::milliseconds;
  CHECK(parse_timeout("300", "T") == milliseconds(300000));
  CHECK(parse_timeout("2.5", "T") == milliseconds(2500));
  CHECK(parse_timeout("1500ms", "T") == milliseconds(1500));
  CHECK(parse_timeout("30s", "T") == milliseconds(30000));
  CHECK(parse_timeout("5m", "T") == milliseconds(300000));
  CHECK(parse_timeout("0", "T") == milliseconds(0));
  for (const char* bad : {"", "soon", "10h", "-5", "1e400", "0.1ms", "1..2"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_timeout(bad, "MLAJIT_COMPILE_TIMEOUT"),
                      Catch::Contains("MLAJIT_COMPILE_TIMEOUT=\"") &&
                          Catch::Contains("is not a time limit"));
  }
}

TEST_CASE("isolation options come from the environment, read when asked") {
  {
    ScopedEnv mode("MLAJIT_COMPILE_MODE", "process");
    ScopedEnv timeout("MLAJIT_COMPILE_TIMEOUT", "45s");
    ScopedEnv helper("MLAJIT_COMPILER_HELPER", "/opt/x/mlajit-compiler-helper");
    const IsolationOptions options = IsolationOptions::from_environment();
    CHECK(options.mode == CompileMode::kProcess);
    CHECK(options.timeout == std::chrono::seconds(45));
    CHECK(options.helper_path == "/opt/x/mlajit-compiler-helper");
    CHECK(options.resolve(CompileMode::kDefault) == CompileMode::kProcess);
    CHECK(options.resolve(CompileMode::kInline) == CompileMode::kInline);
  }
  {
    ScopedEnv mode("MLAJIT_COMPILE_MODE", "");
    const IsolationOptions options = IsolationOptions::from_environment();
    CHECK(options.mode == CompileMode::kAuto);
    CHECK(options.timeout == std::chrono::minutes(5));
  }
  ScopedEnv bad("MLAJIT_COMPILE_MODE", "sometimes");
  CHECK_THROWS_AS(IsolationOptions::from_environment(), Error);
}

TEST_CASE("wait statuses read as what happened to the process") {
  CHECK(describe_wait_status(7 << 8) == "exited with status 7");
  CHECK(describe_wait_status(SIGSEGV) == "was killed by signal 11 (SIGSEGV)");
  CHECK(describe_wait_status(SIGKILL) == "was killed by signal 9 (SIGKILL)");
}
