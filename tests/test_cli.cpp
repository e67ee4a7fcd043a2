// The mlajit CLI, run as a subprocess: exit codes, --help, --json output, and what precompile,
// list and prune do to a cache directory. Also the fleet matrix and the JSON writer directly.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utime.h>

#include <cctype>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "temp_dir.h"
#include "family/family_registry.h"
#include "family/fleet_matrix.h"
#include "family/portable/portable_tiles.h"
#include "jit/codegen.h"
#include "jit/device_profiles.h"
#include "jit/disk_cache.h"
#include "jit/kernel_registry.h"
#include "mlajit/error.h"
#include "mlajit/kernel_spec.h"
#include "mlajit/runtime.h"
#include "tools/json_writer.h"

namespace fs = std::filesystem;
using mlajit::DType;
using mlajit::KernelSpec;
using mlajit::KvScales;

using mlajit::test::TempDir;

namespace {

// ---- a minimal JSON reader, independent of the writer under test ----

struct JsonValue {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool boolean = false;
  double number = 0;
  std::string text;
  std::vector<JsonValue> items;
  std::vector<std::pair<std::string, JsonValue>> members;

  const JsonValue& operator[](const std::string& key) const {
    for (const auto& member : members) {
      if (member.first == key) return member.second;
    }
    throw std::runtime_error("JSON object has no key '" + key + "'");
  }
  bool has(const std::string& key) const {
    for (const auto& member : members) {
      if (member.first == key) return true;
    }
    return false;
  }
};

class JsonReader {
 public:
  explicit JsonReader(const std::string& text) : text_(text) {}

  JsonValue parse_document() {
    JsonValue value = parse_value();
    skip_blanks();
    if (pos_ != text_.size()) fail("trailing characters");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("bad JSON at offset " + std::to_string(pos_) + ": " + what);
  }
  void skip_blanks() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool consume(char c) {
    skip_blanks();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c)) fail(std::string("expected '") + c + "'");
  }
  bool consume_word(const char* word) {
    const std::string w(word);
    if (text_.compare(pos_, w.size(), w) != 0) return false;
    pos_ += w.size();
    return true;
  }

  JsonValue parse_value() {
    skip_blanks();
    if (pos_ >= text_.size()) fail("unexpected end");
    JsonValue value;
    const char c = text_[pos_];
    if (c == '{') return parse_object();
    if (c == '[') return parse_array();
    if (c == '"') {
      value.kind = JsonValue::kString;
      value.text = parse_string();
    } else if (consume_word("true") || consume_word("false")) {
      value.kind = JsonValue::kBool;
      value.boolean = text_[pos_ - 1] == 'e' && text_[pos_ - 2] == 'u';
    } else if (consume_word("null")) {
      value.kind = JsonValue::kNull;
    } else {
      value.kind = JsonValue::kNumber;
      const char* begin = text_.c_str() + pos_;
      char* end = nullptr;
      value.number = std::strtod(begin, &end);
      if (end == begin) fail("not a value");
      pos_ += static_cast<size_t>(end - begin);
    }
    return value;
  }

  std::string parse_string() {
    expect('"');
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      const char c = text_[pos_++];
      if (static_cast<unsigned char>(c) < 0x20) fail("raw control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) fail("dangling escape");
      const char e = text_[pos_++];
      static const std::map<char, char> kSimple{{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'n', '\n'},
                                                {'r', '\r'}, {'t', '\t'}, {'b', '\b'}, {'f', '\f'}};
      if (kSimple.count(e)) {
        out += kSimple.at(e);
      } else if (e == 'u' && pos_ + 4 <= text_.size()) {
        out += "\\u" + text_.substr(pos_, 4);  // kept escaped: enough for these tests
        pos_ += 4;
      } else {
        fail("bad escape");
      }
    }
    expect('"');
    return out;
  }

  JsonValue parse_array() {
    JsonValue value;
    value.kind = JsonValue::kArray;
    expect('[');
    if (consume(']')) return value;
    do {
      value.items.push_back(parse_value());
    } while (consume(','));
    expect(']');
    return value;
  }

  JsonValue parse_object() {
    JsonValue value;
    value.kind = JsonValue::kObject;
    expect('{');
    if (consume('}')) return value;
    do {
      skip_blanks();
      std::string key = parse_string();
      expect(':');
      value.members.emplace_back(std::move(key), parse_value());
    } while (consume(','));
    expect('}');
    return value;
  }

  const std::string& text_;
  size_t pos_ = 0;
};

JsonValue parse_json(const std::string& text) {
  INFO("JSON text:\n" << text);
  return JsonReader(text).parse_document();
}

// ---- running the CLI ----

std::string cli_path() {
  const char* dir = std::getenv("MLAJIT_TEST_WORKER_DIR");
  return std::string(dir ? dir : MLAJIT_TEST_WORKER_DIR) + "/../tools/mlajit";
}

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string read_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

struct CliRun {
  int exit_code = -1;
  std::string out, err;
};

// Runs the CLI with the user cache in `cache_dir` and no shipped layers, budget, no-JIT switch
// or compile mode from the calling environment; `env` ("NAME=value ...") is added to it.
CliRun run_cli(const std::string& args, const std::string& cache_dir, const std::string& env = "") {
  static TempDir io("mlajit-cli-test");
  static int counter = 0;
  const std::string out = io.sub("out" + std::to_string(counter)),
                    err = io.sub("err" + std::to_string(counter));
  ++counter;
  const std::string command =
      "env -u MLAJIT_CACHE_PATH -u MLAJIT_NO_JIT -u MLAJIT_CACHE_MAX_BYTES -u MLAJIT_COMPILE_MODE "
      "-u MLAJIT_COMPILER_HELPER MLAJIT_CACHE_DIR=" +
      shell_quote(cache_dir) + " " + env + " " + shell_quote(cli_path()) + " " + args + " >" +
      shell_quote(out) + " 2>" + shell_quote(err) + " </dev/null";
  const int status = std::system(command.c_str());
  CliRun run;
  run.exit_code = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = read_file(out);
  run.err = read_file(err);
  return run;
}

#define REQUIRE_CLI_BUILT()                                                                   \
  do {                                                                                        \
    INFO("the CLI binary is built by the mlajit_cli target: " << cli_path());                 \
    REQUIRE(fs::exists(cli_path()));                                                          \
  } while (0)

size_t count_lines(const std::string& text) {
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

// The entry files of a cache directory (<dir>/<xx>/<hex>.cubin; temp files start with '.').
std::vector<fs::path> entry_files(const std::string& dir) {
  std::vector<fs::path> files;
  if (!fs::exists(dir)) return files;
  for (const auto& item : fs::recursive_directory_iterator(dir)) {
    const std::string name = item.path().filename().string();
    const bool quarantined = item.path().string().find("/quarantine/") != std::string::npos;
    if (item.is_regular_file() && !quarantined && name[0] != '.' &&
        item.path().extension() == ".cubin") {
      files.push_back(item.path());
    }
  }
  return files;
}

uint64_t total_bytes(const std::vector<fs::path>& files) {
  uint64_t bytes = 0;
  for (const auto& file : files) bytes += fs::file_size(file);
  return bytes;
}

KernelSpec spec_for(const std::string& arch) {
  KernelSpec spec;
  spec.arch = arch;
  return spec;
}

// Writes `count` entries of `payload_bytes` through the cache itself (the real file format),
// with last-use times one hour apart, entry 0 the oldest. Needs neither NVRTC nor a kernel.
void fill_cache(const std::string& dir, int count, size_t payload_bytes) {
  mlajit::jit::CacheOptions options;
  options.user_dir = dir;
  mlajit::jit::DiskCache cache(options);
  // sm_90a: an arch-specific target, as a Hopper-only family's specs carry.
  const std::vector<std::string> archs{"sm_80", "sm_90a", "sm_100", "sm_120"};
  for (int i = 0; i < count; ++i) {
    KernelSpec spec = spec_for(archs[i % archs.size()]);
    spec.head_dim_ckv = i / 4 % 2 ? 256 : 512;
    spec.head_dim_kpe = i / 4 % 2 ? 32 : 64;
    spec.q_dtype = spec.kv_dtype = spec.o_dtype = i / 8 % 2 ? DType::kFloat16 : DType::kBFloat16;
    const auto key = mlajit::jit::CacheKey::from_text("spec=" + spec.text() + "\ntest=" +
                                                      std::to_string(i) + "\n");
    cache.get_or_build(key, [&] {
      return mlajit::jit::CacheEntry{key.text, std::vector<uint8_t>(payload_bytes, uint8_t(i)),
                                     "test entry"};
    });
  }
  // Last use is the file time: make the order explicit rather than depend on write speed.
  auto files = entry_files(dir);
  std::sort(files.begin(), files.end());
  const time_t now = std::time(nullptr);
  for (size_t i = 0; i < files.size(); ++i) {
    utimbuf times{now - 3600 * static_cast<time_t>(files.size() - i),
                  now - 3600 * static_cast<time_t>(files.size() - i)};
    utime(files[i].c_str(), &times);
  }
}

}  // namespace

// ---------------------------------------------------------------- fleet matrix, JSON writer

TEST_CASE("the default fleet matrix is every family's rows on every profiled arch it runs on") {
  using namespace mlajit::family;
  const auto specs = fleet_matrix(FleetMatrixOptions{});
  // portable: every profiled arch x (2 dtypes x 2 head dims + bf16 queries over an e4m3 cache
  // at 512/64, with per-tensor and per-token scales); hopper: sm_90a x (2 dtypes + bf16 over
  // e4m3 with per-tensor and per-token scales) (512/64 only). No causal rows: the mask is a
  // run-time value. Portable's 512/64 rows come at 128 and 16 heads: two specs on every arch,
  // without the narrow layout (rows=wide: 128, 64, 32 heads) and with it. And
  // merge_states (merge_states.h), once per profiled arch; and the hopper family's merge
  // program (mla_merge) for its two output dtypes, on sm_90.
  const size_t archs = mlajit::jit::device_profiles().size();
  const size_t portable_rows = archs * (2 * 2 + 2);
  std::set<std::string> texts;
  size_t hopper_rows = 0, merge_rows = 0, mla_merge_rows = 0, wide_rows = 0;
  size_t narrow_capable_rows = 0;
  for (const auto& spec : specs) {
    texts.insert(spec.text());
    INFO(spec.text());
    if (spec.family == "merge_states") {
      ++merge_rows;
      CHECK(spec.arch.back() != 'a');  // loaded by the device's plain arch
      continue;
    }
    if (spec.family == "mla_merge") {
      ++mla_merge_rows;
      CHECK(spec.arch == "sm_90");
      CHECK(spec.head_dim_ckv == 512);
      continue;
    }
    if (spec.family == "hopper") {
      ++hopper_rows;
      CHECK(spec.arch == "sm_90a");
    } else {
      CHECK(spec.family == "portable");
      CHECK(spec.tile == portable::select_tile_config(spec, profile_target(spec.arch)));
      wide_rows += spec.wide_rows_only;
      narrow_capable_rows += !spec.wide_rows_only;
      if (spec.wide_rows_only) {  // its twin with the narrow layout is in the matrix too
        KernelSpec twin = spec;
        twin.wide_rows_only = false;
        CHECK(std::any_of(specs.begin(), specs.end(),
                          [&](const KernelSpec& other) { return other == twin; }));
      }
    }
    CHECK(spec.q_dtype == spec.o_dtype);
    if (spec.kv_dtype == DType::kFloat8E4M3) {
      CHECK(spec.q_dtype == DType::kBFloat16);
      CHECK(spec.head_dim_ckv == 512);
    } else {
      CHECK(spec.q_dtype == spec.kv_dtype);
    }
  }
  CHECK(hopper_rows == 4);
  CHECK(merge_rows == archs);
  CHECK(mla_merge_rows == 2);  // bf16 and f16 output: the e4m3 rows' bf16 output shares one
  // Every arch: bf16, f16 and the two e4m3 rows at 512/64. (256/32 is MiniCPM3's 40 heads: the
  // narrow layout stays.)
  CHECK(wide_rows == archs * 4);
  CHECK(narrow_capable_rows > wide_rows);
  CHECK(specs.size() == portable_rows + wide_rows + 4 + 2 + archs);
  CHECK(texts.size() == specs.size());  // no duplicates
  FleetMatrixOptions portable_only;
  portable_only.kernel = "portable";
  CHECK(fleet_matrix(portable_only).size() == portable_rows + wide_rows);
  FleetMatrixOptions hopper_only;
  hopper_only.kernel = "hopper";
  CHECK(fleet_matrix(hopper_only).size() == 4 + 2);  // with its merge programs: no NVRTC needed
}

TEST_CASE("the fleet matrix takes archs as given, drops duplicates and rejects unknown ones") {
  using namespace mlajit::family;
  FleetMatrixOptions options;
  options.archs = {"sm_90", "90", "sm_90a"};
  options.dtypes = {DType::kBFloat16};
  options.kv_dtypes = {DType::kBFloat16};
  options.head_dims = {{512, 64}};
  // hopper's rows are sm_90a whatever the 9.0 arch asked: 1 spec and its merge program (on
  // sm_90), however many times asked. portable: sm_90 and sm_90a ("90" is sm_90 again), each
  // tier 1 with and without the narrow layout.
  CHECK(fleet_matrix(options).size() == 6);
  options.kernel = "portable";
  const auto specs = fleet_matrix(options);
  REQUIRE(specs.size() == 4);
  CHECK(specs[0].arch == "sm_90");
  CHECK(specs[0].wide_rows_only);  // spec_for's for the row's 128 heads first
  CHECK(specs[1].arch == "sm_90");
  CHECK_FALSE(specs[1].wide_rows_only);
  CHECK(specs[2].arch == "sm_90a");
  options.archs = {"sm_999"};
  CHECK_THROWS_AS(fleet_matrix(options), mlajit::Error);
  options.archs = {"sm_90"};
  options.kernel = "hoppr";
  CHECK_THROWS_WITH(fleet_matrix(options), Catch::Contains("auto, hopper, portable"));
  options.kernel = "auto";
  options.dtypes = {DType::kFloat8E4M3};  // FP8 rows are the KV cache's, never the queries'
  CHECK_THROWS_WITH(fleet_matrix(options), Catch::Contains("the precompile matrix is empty"));
  options.dtypes = {};
  options.kv_dtypes = {DType::kFloat8E4M3};
  options.head_dims = {};
  const auto fp8 = fleet_matrix(options);
  // portable (tier 1 on sm_90, with and without narrow tiles) and hopper: bf16 queries,
  // 512/64, per-tensor and per-token scales; and hopper's bf16 merge program.
  REQUIRE(fp8.size() == 7);
  size_t token_scaled = 0, merges = 0;
  for (const auto& spec : fp8) {
    if (spec.family == "mla_merge") {
      ++merges;
      CHECK(spec.text().find("mla_merge;q=bf16;kv=bf16;o=bf16;ckv=512;") == 0);
      continue;
    }
    const bool per_token = spec.kv_scales == KvScales::kPerToken128;
    token_scaled += per_token;
    CHECK(spec.text().find(spec.family + (per_token ? ";q=bf16;kv=e4m3;kv_scales=token128;o=bf16;ckv=512;"
                                                    : ";q=bf16;kv=e4m3;o=bf16;ckv=512;")) == 0);
  }
  CHECK(token_scaled == 3);
  CHECK(merges == 1);
  CHECK(fp8.front().family != fp8.back().family);
  CHECK_THROWS_AS(parse_head_dims("128/16"), mlajit::Error);
  CHECK_THROWS_AS(parse_head_dims("512x64"), mlajit::Error);
  CHECK(parse_head_dims("256/32") == HeadDims{256, 32});
}

TEST_CASE("a shared-memory override and all-tiers change which tiles the matrix holds") {
  using namespace mlajit::family;
  using portable::tier_of;
  FleetMatrixOptions options;
  options.archs = {"sm_90"};
  options.kernel = "portable";  // the tiers are the portable family's
  options.dtypes = {DType::kBFloat16};
  options.kv_dtypes = {DType::kBFloat16};
  options.head_dims = {{512, 64}};
  REQUIRE(fleet_matrix(options).size() == 2);  // tier 1, with and without the narrow layout
  CHECK(tier_of(fleet_matrix(options)[0].tile) == 1);
  options.all_tiers = true;
  const auto tiers = fleet_matrix(options);
  REQUIRE(tiers.size() == 6);  // sm_90 fits all three, each with and without the narrow layout
  CHECK(tier_of(tiers[0].tile) == 1);
  CHECK(tiers[0].wide_rows_only);  // the 128-head row's first
  std::multiset<int> tier_counts;
  for (const auto& spec : tiers) tier_counts.insert(tier_of(spec.tile));
  CHECK(tier_counts == std::multiset<int>{1, 1, 2, 2, 3, 3});
  options.all_tiers = false;
  const DeviceTarget small = profile_target("sm_89");
  options.smem = SmemOverride{small.smem_per_sm, small.smem_per_block_optin};
  CHECK(tier_of(fleet_matrix(options)[0].tile) == 3);
  // Limits no tier fits: the rows are skipped, and the empty matrix says why.
  options.kernel = "auto";
  options.smem = SmemOverride{4096, 4096};
  CHECK_THROWS_WITH(fleet_matrix(options), Catch::Contains("no MLA tile config fits"));
  // A family asked for by name that cannot build an asked row says so, naming the row.
  options.kernel = "portable";
  try {
    fleet_matrix(options);
    FAIL("an impossible row was built");
  } catch (const mlajit::Error& error) {
    CHECK(error.code() == mlajit::ErrorCode::kUnsupported);
    CHECK_THAT(error.what(), Catch::Contains("kernel family 'portable' cannot build bf16 512/64 "
                                             "for sm_90"));
  }
}

TEST_CASE("the JSON writer escapes strings and keeps arrays of objects on the key's line") {
  using mlajit::cli::Json;
  Json gpus = Json::array();
  gpus.push(Json::object().set("name", "H200 \"SXM\"\n\ttab\\").set("sms", 132));
  gpus.push(Json::object().set("bad utf8", std::string("a\xff" "b")).set("ok", 0.5));
  Json root = Json::object();
  root.set("gpus", std::move(gpus)).set("empty", Json::array()).set("nan", 0.0 / 0.0);
  root.set("list", Json::array().push(1).push(true).push(Json()));
  const std::string text = root.dump();
  INFO(text);
  CHECK(text.find("\"gpus\": [ {") != std::string::npos);
  CHECK(text.find("\"empty\": []") != std::string::npos);
  CHECK(text.find("\"nan\": null") != std::string::npos);
  CHECK(text.find("\"list\": [1, true, null]") != std::string::npos);
  const JsonValue parsed = parse_json(text);
  CHECK(parsed["gpus"].items.size() == 2);
  CHECK(parsed["gpus"].items[0]["name"].text == "H200 \"SXM\"\n\ttab\\");
  CHECK(parsed["gpus"].items[0]["sms"].number == 132);
  CHECK(parsed["gpus"].items[1]["bad utf8"].text == "a\\ufffdb");
  CHECK(parsed["gpus"].items[1]["ok"].number == 0.5);
  CHECK(Json::quote(std::string("\x01") + "\xc3\xa9") == "\"\\u0001\xc3\xa9\"");
}

// ---------------------------------------------------------------- the CLI: usage

TEST_CASE("the CLI is a client of libmlajit.so: it links the shared library, no internals") {
  REQUIRE_CLI_BUILT();
  TempDir out;
  auto run = [&](const std::string& command) {
    const std::string file = out.sub("output");
    REQUIRE(std::system((command + " > " + shell_quote(file) + " 2>&1").c_str()) == 0);
    return read_file(file);
  };
  const std::string libraries = run("ldd " + shell_quote(cli_path()));
  INFO(libraries);
  CHECK(libraries.find("libmlajit.so") != std::string::npos);
  // Its own symbols: the CLI, the check library and what they instantiate; none of the
  // library's internal layers (they would mean a second copy of the library's state).
  const std::string symbols = run("nm -C --defined-only " + shell_quote(cli_path()));
  for (const char* layer : {"mlajit::jit::", "mlajit::driver::", "mlajit::family::",
                            "mlajit::plan::", "mlajit::capi::", "mlajit::BatchMlaAttention::"}) {
    INFO(layer);
    CHECK(symbols.find(layer) == std::string::npos);
  }
}

TEST_CASE("every command's --help exits 0 and names the command") {
  REQUIRE_CLI_BUILT();
  TempDir cache("mlajit-cli-test");
  for (const std::string command : {"", "precompile", "list", "info", "verify", "bench", "prune"}) {
    const CliRun run = run_cli(command + " --help", cache.path());
    INFO("mlajit " << command << " --help\nstdout: " << run.out << "\nstderr: " << run.err);
    CHECK(run.exit_code == 0);
    CHECK(run.out.find("Usage") != std::string::npos);
    CHECK(run.out.find(command.empty() ? std::string("mlajit") : command) != std::string::npos);
    CHECK(run.out.find("--help") != std::string::npos);
  }
  const CliRun version = run_cli("--version", cache.path());
  CHECK(version.exit_code == 0);
  CHECK(version.out.find(MLAJIT_VERSION_STRING) != std::string::npos);
}

TEST_CASE("bad options exit 2 with a one-line reason") {
  REQUIRE_CLI_BUILT();
  TempDir cache("mlajit-cli-test");
  const std::vector<std::pair<std::string, std::string>> cases{
      {"", "subcommand"},                               // no command at all
      {"frobnicate", "frobnicate"},                     // unknown command
      {"list --no-such-flag", "--no-such-flag"},        // unknown flag
      {"precompile --arch sm_999 --dry-run", "sm_999"}, // unknown arch (found after parsing)
      {"precompile --dtype f32 --dry-run", "f32"},
      {"precompile --head-dims 128/16 --dry-run", "128/16"},
      {"precompile --causal 2 --dry-run", "causal"},
      {"precompile --profile lots --dry-run", "lots"},
      {"precompile -j 0 --dry-run", "-j"},
      {"prune --max-size banana", "banana"},
      {"prune", "--max-size"},                          // required
      {"prune --max-size 1G --older-than soon", "soon"},
      {"prune --max-size .", "'.'"},                    // no digit: once an abort in stod
      {"prune --max-size 1G --older-than .d", "'.d'"},
      {"prune --max-size " + std::string(400, '9'), "too large"},  // once out_of_range in stod
      {"prune --max-size 1G --older-than 999999d", "100 years"},  // would overflow the cutoff
      {"precompile --profile . --dry-run", "'.'"},
      {"bench --shape 128,64", "128,64"},
      {"bench --tier 4", "tier"},
      // An unknown kernel family lists the known ones, before a GPU is looked for.
      {"precompile --kernel hoppr --dry-run", "auto, hopper, portable"},
      {"verify --kernel hoppr", "auto, hopper, portable"},
      {"bench --kernel mla_fa2", "auto, hopper, portable"},
  };
  for (const auto& [args, mentioned] : cases) {
    const CliRun run = run_cli(args, cache.path());
    INFO("mlajit " << args << "\nstdout: " << run.out << "\nstderr: " << run.err);
    CHECK(run.exit_code == 2);
    CHECK(count_lines(run.err) == 1);
    CHECK(run.err.find(mentioned) != std::string::npos);
    CHECK(run.out.empty());
  }
}

TEST_CASE("precompile --dry-run lists the default matrix without compiling") {
  REQUIRE_CLI_BUILT();
  TempDir cache("mlajit-cli-test");
  const CliRun run = run_cli("precompile --dry-run --json", cache.path());
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const JsonValue report = parse_json(run.out);
  const auto expected = mlajit::family::fleet_matrix(mlajit::family::FleetMatrixOptions{});
  REQUIRE(report["matrix"].items.size() == expected.size());
  CHECK(report["specs"].number == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) CHECK(report["matrix"].items[i].text == expected[i].text());
  CHECK(entry_files(cache.path()).empty());
}

// ---------------------------------------------------------------- the CLI: cache commands

TEST_CASE("list --json agrees with the entry files on disk") {
  REQUIRE_CLI_BUILT();
  TempDir cache("mlajit-cli-test");
  fill_cache(cache.path(), 6, 1000);
  const auto files = entry_files(cache.path());
  REQUIRE(files.size() == 6);
  std::ofstream(files[0], std::ios::app) << "trailing junk";  // no longer verifies

  const CliRun run = run_cli("list --json", cache.path());
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const JsonValue report = parse_json(run.out);
  REQUIRE(report["entries"].items.size() == files.size());
  CHECK(report["count"].number == files.size());
  CHECK(report["bytes"].number == total_bytes(files));
  CHECK(report["not_verifying"].number == 1);
  std::set<std::string> paths;
  for (const auto& entry : report["entries"].items) {
    paths.insert(fs::canonical(entry["path"].text).string());
    CHECK(entry["layer"].text == "user");
    CHECK(entry["bytes"].number == fs::file_size(entry["path"].text));
    if (!entry["verifies"].boolean) {
      CHECK(entry.has("problem"));
      continue;
    }
    const KernelSpec spec = KernelSpec::parse(entry["spec"].text);
    CHECK(entry["arch"].text == spec.arch);
    CHECK(entry["last_use_unix"].number > 0);
  }
  for (const auto& file : files) CHECK(paths.count(fs::canonical(file).string()) == 1);

  // The text table says the same; --cache-dir reads a directory instead of the environment's.
  TempDir elsewhere("mlajit-cli-test");
  const CliRun direct = run_cli("list --cache-dir " + shell_quote(cache.path()), elsewhere.path());
  CHECK(direct.exit_code == 0);
  CHECK(direct.out.find("6 entries") != std::string::npos);
  CHECK(direct.out.find("1 do not verify") != std::string::npos);
  CHECK(direct.out.find(";arch=sm_90a ") != std::string::npos);  // spec column
  CHECK(direct.out.find(" sm_90a ") != std::string::npos);       // arch column
  const CliRun empty = run_cli("list", elsewhere.path());
  CHECK(empty.exit_code == 0);
  CHECK(empty.out.find("0 entries") != std::string::npos);
}

TEST_CASE("mlajit prune keeps the user cache within --max-size, newest entries first") {
  REQUIRE_CLI_BUILT();
  TempDir cache("mlajit-cli-test");
  fill_cache(cache.path(), 8, 4000);
  auto files = entry_files(cache.path());
  REQUIRE(files.size() == 8);
  const uint64_t before = total_bytes(files);
  const uint64_t budget = before / 2 + 100;  // room for four entries and a bit

  // Newest first: the four most recently used must survive.
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    return fs::last_write_time(a) > fs::last_write_time(b);
  });
  const std::vector<fs::path> newest(files.begin(), files.begin() + 4);

  const CliRun run = run_cli("prune --json --max-size " + std::to_string(budget), cache.path());
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  const JsonValue report = parse_json(run.out);
  const auto left = entry_files(cache.path());
  CHECK(total_bytes(left) <= budget);
  CHECK(left.size() == 4);
  CHECK(report["removed_count"].number == 4);
  CHECK(report["removed"].items.size() == 4);
  CHECK(report["remaining_bytes"].number == total_bytes(left));
  CHECK(report["max_bytes"].number == budget);
  for (const auto& path : newest) CHECK(fs::exists(path));

  // Units are understood; a budget above the size removes nothing.
  const CliRun roomy = run_cli("prune --max-size 2G --older-than 7d --json", cache.path());
  REQUIRE(roomy.exit_code == 0);
  CHECK(parse_json(roomy.out)["max_bytes"].number == 2.0 * 1024 * 1024 * 1024);
  CHECK(parse_json(roomy.out)["removed_count"].number == 0);
  // --older-than removes what was last used before the cut-off, within the budget too.
  const CliRun aged = run_cli("prune --max-size 2G --older-than 150m", cache.path());
  CHECK(aged.exit_code == 0);
  CHECK(entry_files(cache.path()).size() == 2);
  CHECK(aged.out.find("removed 2 entries") != std::string::npos);
  // A budget of 0 empties the user cache.
  CHECK(run_cli("prune --max-size 0", cache.path()).exit_code == 0);
  CHECK(entry_files(cache.path()).empty());
}

TEST_CASE("info --json always has a gpus array, and --gpu-count agrees with it") {
  REQUIRE_CLI_BUILT();
  TempDir cache("mlajit-cli-test");
  fill_cache(cache.path(), 3, 100);
  const CliRun count = run_cli("info --gpu-count", cache.path());
  REQUIRE(count.exit_code == 0);
  REQUIRE(!count.out.empty());
  const int gpus = std::stoi(count.out);
  CHECK(count.out == std::to_string(gpus) + "\n");
  if (gpus == 0) {  // the reason goes to stderr, where a script's $(...) does not take it
    CHECK(count.err.find("mlajit info: no usable GPU: ") == 0);
  }

  const CliRun info = run_cli("info --json", cache.path());
  INFO(info.out << info.err);
  REQUIRE(info.exit_code == 0);
  const JsonValue report = parse_json(info.out);
  REQUIRE(report["gpus"].kind == JsonValue::kArray);
  CHECK(report["gpus"].items.size() == static_cast<size_t>(gpus));
  // scripts/main.sh greps for this form.
  CHECK(info.out.find(gpus ? "\"gpus\": [ {" : "\"gpus\": []") != std::string::npos);
  CHECK(report["version"].text == MLAJIT_VERSION_STRING);
  CHECK(report["nvrtc"].has("available"));
  CHECK(report["driver"].has("available"));
  const JsonValue& layers = report["cache"]["layers"];
  REQUIRE(layers.items.size() == 1);
  CHECK(layers.items[0]["layer"].text == "user");
  CHECK(layers.items[0]["entries"].number == 3);
  CHECK(run_cli("info", cache.path()).exit_code == 0);
}

TEST_CASE("verify and bench without a GPU exit 1 and say why") {
  REQUIRE_CLI_BUILT();
  TempDir cache("mlajit-cli-test");
  const CliRun count = run_cli("info --gpu-count", cache.path());
  REQUIRE(count.exit_code == 0);
  if (count.out != "0\n") {
    WARN("a GPU is present: verify and bench run in the GPU suite, not here");
    return;
  }
  for (const std::string command : {"verify", "verify --quick --json", "bench --shape 16,1,64,64"}) {
    const CliRun run = run_cli(command, cache.path());
    INFO(command << ": " << run.err);
    CHECK(run.exit_code == 1);
    CHECK(run.err.find("needs a GPU") != std::string::npos);
  }
}

// ---------------------------------------------------------------- the CLI: bench's shapes

namespace {

const JsonValue* find_shape(const JsonValue& shapes, int heads, int batch, double kv_len, int page,
                            int q_len, const std::string& variant) {
  for (const auto& shape : shapes.items) {
    const bool kv = kv_len < 0 ? shape["kv_len"].kind == JsonValue::kString
                               : shape["kv_len"].kind == JsonValue::kNumber &&
                                     shape["kv_len"].number == kv_len;
    if (shape["heads"].number == heads && shape["batch"].number == batch && kv &&
        shape["page"].number == page && shape["q_len"].number == q_len &&
        shape["variant"].text == variant) {
      return &shape;
    }
  }
  return nullptr;
}

}  // namespace

TEST_CASE("bench --dry-run lists the default shapes with the newest peer timings, without a GPU") {
  REQUIRE_CLI_BUILT();
  TempDir cache("mlajit-cli-test");
  const CliRun run = run_cli("bench --dry-run --json", cache.path());
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const JsonValue shapes = parse_json(run.out)["shapes"];
  // The 26 rows of baseline.md's "Re-measured 2026-12-01" table, then a second ragged batch,
  // the 8 shapes of the 2026-11-29 tables it did not re-measure and the 3 sparse top-k rows
  // (no peer timings).
  REQUIRE(shapes.items.size() == 38);
  size_t with_peers = 0;
  for (const auto& shape : shapes.items) with_peers += shape["fa2_us"].kind == JsonValue::kNumber;
  CHECK(with_peers == 26);
  const JsonValue* decode = find_shape(shapes, 128, 64, 4096, 64, 1, "");
  REQUIRE(decode);
  CHECK((*decode)["fa2_us"].number == Approx(278.75));
  CHECK((*decode)["fa3_us"].number == Approx(129.18));
  CHECK((*decode)["flashmla_us"].number == Approx(114.21));
  const JsonValue* page1 = find_shape(shapes, 128, 64, 4096, 1, 1, "");
  REQUIRE(page1);
  CHECK((*page1)["fa2_us"].number == Approx(301.90));
  CHECK((*page1)["flashmla_us"].kind == JsonValue::kNull);  // FlashMLA: page size 64 only
  const JsonValue* causal = find_shape(shapes, 128, 16, 16384, 64, 4, "causal");
  REQUIRE(causal);
  CHECK((*causal)["causal"].boolean);
  CHECK((*causal)["flashmla_us"].number == Approx(398.16));
  const JsonValue* ragged =
      find_shape(shapes, 128, 64, -1, 64, 1, "ragged U[1,8192] seed 20260601");
  REQUIRE(ragged);
  CHECK((*ragged)["fa2_us"].number == Approx(430.86));
  // Kept from the older tables, compared with nothing now.
  for (const auto& [heads, batch, kv_len, page, variant] :
       std::vector<std::tuple<int, int, int, int, std::string>>{
           {16, 128, 4096, 1, ""}, {128, 64, 4096, 64, "fp16"}, {16, 128, 16384, 64, "tier3"}}) {
    const JsonValue* old = find_shape(shapes, heads, batch, kv_len, page, 1, variant);
    INFO(heads << "," << batch << "," << kv_len << "," << page << " " << variant);
    REQUIRE(old);
    CHECK((*old)["fa2_us"].kind == JsonValue::kNull);
  }
  for (int batch : {1, 32, 128}) {
    const JsonValue* top_k = find_shape(shapes, 128, batch, 2048, 1, 1, "top-k 2048 of 65536");
    INFO("top-k batch " << batch);
    REQUIRE(top_k);
    CHECK((*top_k)["fa2_us"].kind == JsonValue::kNull);
    CHECK((*top_k)["flashmla_us"].kind == JsonValue::kNull);
  }
  const CliRun text = run_cli("bench --dry-run", cache.path());
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("38 shapes") != std::string::npos);
  CHECK(text.out.find("278.75") != std::string::npos);
}

TEST_CASE("bench --shape takes baseline.md's notation, and modifiers change which peers apply") {
  REQUIRE_CLI_BUILT();
  TempDir cache("mlajit-cli-test");
  auto shapes_of = [&](const std::string& args) {
    const CliRun run = run_cli("bench --dry-run --json " + args, cache.path());
    INFO(args << ": " << run.err);
    REQUIRE(run.exit_code == 0);
    return parse_json(run.out)["shapes"];
  };
  // The same problem written two ways gets the same peer row.
  const JsonValue explicit_causal = shapes_of("--shape 128,64,4096,64,2,1");
  const JsonValue modified = shapes_of("--shape 128,64,4096,64 --causal --qlen 2");
  REQUIRE(explicit_causal.items.size() == 1);
  CHECK(explicit_causal.items[0]["fa2_us"].number == Approx(551.94));
  CHECK(modified.items[0]["fa2_us"].number == Approx(551.94));
  const JsonValue ragged = shapes_of("--shape ragged:128,64,1,8192,20260601");
  CHECK(ragged.items[0]["flashmla_us"].number == Approx(130.93));
  CHECK(shapes_of("--shape ragged:128,64,1,8192,7").items[0]["fa2_us"].kind == JsonValue::kNull);
  // A top-k selection reads as many tokens as a dense page-1 row but is another problem.
  const JsonValue top_k = shapes_of("--shape topk:128,64,4096,65536");
  CHECK(top_k.items[0]["variant"].text == "top-k 4096 of 65536");
  CHECK(top_k.items[0]["page"].number == 1);
  CHECK(top_k.items[0]["fa2_us"].kind == JsonValue::kNull);
  // The peers were timed in bf16 on their own tiles: fp16 or a forced tier has no peer figure.
  CHECK(shapes_of("--shape 16,16,4096,64 --dtype f16").items[0]["fa2_us"].kind ==
        JsonValue::kNull);
  CHECK(shapes_of("--shape 16,16,4096,64 --tier 2").items[0]["fa3_us"].kind == JsonValue::kNull);
  CHECK(shapes_of("--shape 16,16,4096,64").items[0]["fa3_us"].number == Approx(32.80));
  // The modifiers apply to the default shapes too.
  const JsonValue all_fp16 = shapes_of("--dtype f16");
  CHECK(all_fp16.items.size() == 38);
  for (const auto& shape : all_fp16.items) CHECK(shape["dtype"].text == "f16");
  for (const std::string bad : {"--shape 128,64,4096,64,2", "--shape ragged:128,64,9,8",
                                "--shape 129,1,1,1", "--shape 128,64,4096,64,1,2",
                                "--shape topk:128,1,4096,2048", "--shape topk:128,1,2048"}) {
    const CliRun run = run_cli("bench --dry-run " + bad, cache.path());
    INFO(bad << ": " << run.err);
    CHECK(run.exit_code == 2);
    CHECK(count_lines(run.err) == 1);
    CHECK(run.err.find("--shape") != std::string::npos);
  }
}

TEST_CASE("bench --kv-dtype e4m3 applies to every shape, and no peer has an FP8 figure") {
  REQUIRE_CLI_BUILT();
  TempDir cache("mlajit-cli-test");
  const CliRun run = run_cli("bench --dry-run --json --kv-dtype e4m3", cache.path());
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const JsonValue shapes = parse_json(run.out)["shapes"];
  CHECK(shapes.items.size() == 38);  // the default list, each over an FP8 cache
  for (const auto& shape : shapes.items) {
    CHECK(shape["dtype"].text != "e4m3");  // the queries keep their 16-bit dtype
    CHECK(shape["kv_dtype"].text == "e4m3");
    CHECK(shape["fa2_us"].kind == JsonValue::kNull);
    CHECK(shape["fa3_us"].kind == JsonValue::kNull);
    CHECK(shape["flashmla_us"].kind == JsonValue::kNull);
  }
  const JsonValue* decode = find_shape(shapes, 128, 64, 4096, 64, 1, "kv e4m3");
  CHECK(decode);
  const CliRun f16 =
      run_cli("bench --dry-run --json --shape 16,16,4096,64 --dtype f16 --kv-dtype e4m3",
              cache.path());
  REQUIRE(f16.exit_code == 0);
  CHECK(parse_json(f16.out)["shapes"].items[0]["variant"].text == "fp16 kv e4m3");
  // Without --kv-dtype the KV cache is the queries' dtype and the peers apply as before.
  const CliRun plain = run_cli("bench --dry-run --json --shape 16,16,4096,64", cache.path());
  REQUIRE(plain.exit_code == 0);
  CHECK(parse_json(plain.out)["shapes"].items[0]["kv_dtype"].text == "bf16");
  CHECK(parse_json(plain.out)["shapes"].items[0]["fa3_us"].number == Approx(32.80));
  const CliRun bad = run_cli("bench --dry-run --kv-dtype fp8", cache.path());
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--kv-dtype") != std::string::npos);
}

TEST_CASE("the embedded peer timings are the newest table of shared/perf/baseline.md") {
  // The data file is generated from baseline.md, which lives in the workplace's shared folder
  // beside the repository; where it is, the file must be what the script makes of it.
  const fs::path baseline = fs::path(MLAJIT_SOURCE_DIR) / ".." / "shared" / "perf" / "baseline.md";
  if (!fs::exists(baseline)) {
    WARN("skipped: no " << baseline.string());
    return;
  }
  TempDir out;
  const std::string generated = out.sub("peer_timings.csv");
  const std::string command = shell_quote(std::string(MLAJIT_SOURCE_DIR) +
                                          "/scripts/peer-timings-from-baseline.sh") +
                              " " + shell_quote(baseline.string()) + " > " + shell_quote(generated);
  REQUIRE(std::system(command.c_str()) == 0);
  const std::string committed =
      read_file(std::string(MLAJIT_SOURCE_DIR) + "/tools/data/peer_timings_h200.csv");
  INFO("regenerate with: scripts/peer-timings-from-baseline.sh > tools/data/peer_timings_h200.csv");
  CHECK(read_file(generated) == committed);
  CHECK(committed.find("\"128,64,4096,64\",278.75,129.18,114.21,") != std::string::npos);
}

// ---------------------------------------------------------------- the CLI: precompile

TEST_CASE("precompile builds the requested matrix into --out and a second run compiles nothing") {
  REQUIRE_CLI_BUILT();
  TempDir cache, out;
  const std::string args = "precompile --kernel portable --arch sm_80,sm_90 --dtype bf16 "
                           "--kv-dtype bf16 --head-dims 512/64 -j 2 --json --out " +
                           shell_quote(out.path());
  const CliRun first = run_cli(args, cache.path());
  INFO(first.out << first.err);
  REQUIRE(first.exit_code == 0);
  const JsonValue report = parse_json(first.out);
  // sm_80 tier 2 and sm_90 tier 1, each with and without the narrow layout (rows=wide).
  CHECK(report["specs"].number == 4);
  CHECK(report["compiled"].number == 4);
  CHECK(report["cached"].number == 0);
  CHECK(report["failed"].number == 0);
  const auto files = entry_files(out.path());
  CHECK(files.size() == 4);
  CHECK(report["bytes"].number > 0);
  CHECK(entry_files(cache.path()).empty());  // --out leaves the user cache alone

  const CliRun second = run_cli(args, cache.path());
  INFO(second.out << second.err);
  REQUIRE(second.exit_code == 0);
  const JsonValue again = parse_json(second.out);
  CHECK(again["compiled"].number == 0);
  CHECK(again["cached"].number == 4);
  CHECK(entry_files(out.path()).size() == 4);

  // The listing of the shipped directory names exactly the specs of the matrix.
  const CliRun list = run_cli("list --json --cache-dir " + shell_quote(out.path()), cache.path());
  REQUIRE(list.exit_code == 0);
  std::set<std::string> listed, built;
  const JsonValue listing = parse_json(list.out);
  for (const auto& entry : listing["entries"].items) {
    CHECK(entry["verifies"].boolean);
    listed.insert(entry["spec"].text);
  }
  for (const auto& entry : report["entries"].items) built.insert(entry["spec"].text);
  CHECK(listed == built);

  // Text mode (stderr not a terminal): one progress line per spec, then the summary table.
  const CliRun text = run_cli("precompile --kernel portable --arch sm_80 --dtype bf16 "
                              "--kv-dtype bf16 --head-dims 512/64 --out " +
                                  shell_quote(out.path()),
                              cache.path());
  CHECK(text.exit_code == 0);
  CHECK(text.err.find("[1/2] ") == 0);
  CHECK(text.err.find("| cached   portable;") != std::string::npos);
  CHECK(text.out.find("compiled") != std::string::npos);
}

TEST_CASE("precompile's parallel jobs compile in helper processes beside the library") {
  REQUIRE_CLI_BUILT();
  if (!mlajit::compiler_info().available) {
    WARN("NVRTC is not available, skipping: " << mlajit::compiler_info().unavailable_reason);
    return;
  }
  TempDir cache, out;
  // process mode: a job that found no helper fails instead of compiling in the CLI; at debug
  // level the library names each helper it starts. The CLI loads build/libmlajit.so, whose
  // helper is build/mlajit-compiler-helper.
  // Tier 2 at 256/32 on both (one spec each, no narrow-layout twin).
  const CliRun run = run_cli("precompile --kernel portable --arch sm_86,sm_89 --dtype bf16 "
                             "--head-dims 256/32 -j 2 --json --out " + shell_quote(out.path()),
                             cache.path(),
                             "MLAJIT_COMPILE_MODE=process SPDLOG_LEVEL=mlajit.jit=debug");
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(parse_json(run.out)["compiled"].number == 2);
  const std::string helper =
      fs::canonical(cli_path()).parent_path().parent_path().string() + "/mlajit-compiler-helper";
  size_t started = 0;
  for (size_t at = run.err.find("started compiler helper "); at != std::string::npos;
       at = run.err.find("started compiler helper ", at + 1)) {
    ++started;
    CHECK(run.err.compare(at, 24 + helper.size() + 1, "started compiler helper " + helper + " ") == 0);
  }
  // Pooled: at most one helper per job (two jobs that never overlap share one).
  CHECK(started >= 1);
  CHECK(started <= 2);
  CHECK(run.err.find("compiling in this process") == std::string::npos);
}

namespace {

// Writes into `dir` an entry for every spec of the default matrix, under the key the registry
// computes for it (as a first precompile would; the payload is no real cubin).
size_t fill_with_default_matrix(const std::string& dir) {
  mlajit::jit::CacheOptions options;
  options.user_dir = dir;
  mlajit::jit::KernelRegistry registry(options);
  const auto specs = mlajit::family::fleet_matrix(mlajit::family::FleetMatrixOptions{});
  for (const KernelSpec& spec : specs) {
    mlajit::jit::KernelMetadata metadata;
    metadata.spec_text = spec.text();
    metadata.lowered_name = "_Z4fakev";
    metadata.geometry = mlajit::jit::generate_program(spec).geometry;
    const mlajit::jit::CacheKey key = registry.key_for(spec);
    registry.cache().get_or_build(key, [&] {
      return mlajit::jit::CacheEntry{key.text, {0x7f, 'E', 'L', 'F'}, metadata.serialize()};
    });
  }
  return specs.size();
}

}  // namespace

TEST_CASE("precompile of the default matrix over a complete cache compiles nothing") {
  // The keys precompile computes for the default matrix are the ones a first run filed its
  // entries under, in another process: a second run finds them all.
  REQUIRE_CLI_BUILT();
  TempDir cache, out;
  const size_t specs = fill_with_default_matrix(out.path());
  // portable: 10 archs x 6 rows, and 40 twins without the narrow layout (rows=wide: every
  // arch's four 512/64 rows); hopper: sm_90a x 4 rows and its 2 merge programs; merge_states:
  // one per arch.
  CHECK(specs == 116);
  const CliRun run = run_cli("precompile --json --out " + shell_quote(out.path()), cache.path());
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const JsonValue report = parse_json(run.out);
  CHECK(report["specs"].number == specs);
  CHECK(report["compiled"].number == 0);
  CHECK(report["cached"].number == specs);
  CHECK(report["entries"].items[0]["family"].text == "portable");
  size_t hopper = 0;
  for (const JsonValue& entry : report["entries"].items) hopper += entry["family"].text == "hopper";
  CHECK(hopper == 4);
  CHECK(entry_files(out.path()).size() == specs);
}

TEST_CASE("precompile of the default matrix twice compiles nothing the second time", "[.full]") {
  REQUIRE_CLI_BUILT();
  TempDir cache, out;
  const std::string args = "precompile -j 2 --json --out " + shell_quote(out.path());
  const CliRun first = run_cli(args, cache.path());
  REQUIRE(first.exit_code == 0);
  const double specs = parse_json(first.out)["specs"].number;
  CHECK(specs == mlajit::family::fleet_matrix(mlajit::family::FleetMatrixOptions{}).size());
  CHECK(parse_json(first.out)["compiled"].number == specs);
  const CliRun second = run_cli(args, cache.path());
  REQUIRE(second.exit_code == 0);
  CHECK(parse_json(second.out)["compiled"].number == 0);
  CHECK(parse_json(second.out)["cached"].number == specs);
}

TEST_CASE("precompile --kernel names the family's rows, and says why it cannot build one") {
  REQUIRE_CLI_BUILT();
  TempDir cache;
  const CliRun rows = run_cli("precompile --kernel portable --arch sm_90a --dry-run --json",
                              cache.path());
  INFO(rows.err);
  REQUIRE(rows.exit_code == 0);
  const JsonValue matrix = parse_json(rows.out);
  // Tier 1: the four 512/64 rows with and without narrow tiles, the two 256/32 rows with.
  CHECK(matrix["specs"].number == 10);
  for (const auto& spec : matrix["matrix"].items) {
    CHECK(spec.text.rfind("portable;", 0) == 0);
    CHECK(spec.text.find(";arch=sm_90a") != std::string::npos);
  }
  const CliRun cannot = run_cli("precompile --kernel portable --arch sm_90 --profile 4K --dry-run",
                                cache.path());
  CHECK(cannot.exit_code == 1);
  CHECK(cannot.err.find("kernel family 'portable' cannot build") != std::string::npos);
  CHECK(cannot.err.find("no MLA tile config fits") != std::string::npos);
}

TEST_CASE("info lists the kernel families and what each profiled arch gets, without a GPU") {
  REQUIRE_CLI_BUILT();
  TempDir cache;
  const CliRun run = run_cli("info --json", cache.path());
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const JsonValue report = parse_json(run.out);
  REQUIRE(report["families"].items.size() == 2);
  const JsonValue& hopper = report["families"].items[0];
  CHECK(hopper["name"].text == "hopper");
  REQUIRE(hopper["archs"].items.size() == 1);
  CHECK(hopper["archs"].items[0].text == "sm_90");
  const JsonValue& portable = report["families"].items[1];
  CHECK(portable["name"].text == "portable");
  CHECK(portable["archs"].items.size() == 10);
  CHECK(portable["head_dims"].items[0].text == "512/64");
  CHECK(report["archs"]["sm_90"]["family"].text == "hopper");
  CHECK(report["archs"]["sm_90"]["tier"].number == 0);  // one tile config: no tiers
  CHECK(report["archs"]["sm_100"]["family"].text == "portable");
  CHECK(report["archs"]["sm_100"]["tier"].number == 1);
  CHECK(report["archs"]["sm_86"]["tier"].number == 3);
  CHECK(report["archs"]["sm_80"]["spec"].text.find("arch=sm_80") != std::string::npos);
  const CliRun text = run_cli("info", cache.path());
  CHECK(text.out.find("family  hopper: ") != std::string::npos);
  CHECK(text.out.find("family  portable: ") != std::string::npos);
  CHECK(text.out.find("arch    sm_90   default shape gets hopper (231288 B smem)") !=
        std::string::npos);
  CHECK(text.out.find("arch    sm_100  default shape gets portable tier 1") != std::string::npos);
}
