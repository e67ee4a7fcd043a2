// The on-disk entry format and the cache key hash.
//
// Layout (all integers little-endian, no padding):
//   0   char[8]  magic "MLAJITC\0"
//   8   u32      format version (kCacheFormatVersion)
//   12  u32      key text length K, then K bytes of key text
//       u32      metadata length M, then M bytes of metadata
//       u64      payload size P
//       u64      XXH3-64 of the payload
//       u64      XXH3-64 of every header byte before this field
//       P bytes  payload
// The header checksum is verified before any field past the lengths is trusted, and every
// length is checked against both a fixed bound and the bytes actually present before anything
// is allocated, so a corrupt or hostile file cannot make the reader allocate or read out of
// bounds.
#include "jit/cache_entry_format.h"

#include <cstring>

#include <fmt/format.h>
#include <xxhash.h>

#include "jit/disk_cache.h"
#include "mlajit/error.h"

namespace mlajit::jit {
namespace {

constexpr char kMagic[8] = {'M', 'L', 'A', 'J', 'I', 'T', 'C', '\0'};

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void put_bytes(std::vector<uint8_t>& out, const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  out.insert(out.end(), p, p + size);
}

// A bounds-checked little-endian reader over a byte buffer. Every read says whether the bytes
// were there; nothing past `size_` is ever touched.
class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& bytes) : data_(bytes.data()), size_(bytes.size()) {}
  size_t offset() const { return offset_; }
  size_t remaining() const { return size_ - offset_; }

  bool u32(uint32_t* v) {
    if (remaining() < 4) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i) *v |= uint32_t(data_[offset_ + i]) << (8 * i);
    offset_ += 4;
    return true;
  }
  bool u64(uint64_t* v) {
    if (remaining() < 8) return false;
    *v = 0;
    for (int i = 0; i < 8; ++i) *v |= uint64_t(data_[offset_ + i]) << (8 * i);
    offset_ += 8;
    return true;
  }
  // Returns a pointer to `n` bytes in place, or nullptr when fewer remain.
  const uint8_t* take(uint64_t n) {
    if (n > remaining()) return nullptr;
    const uint8_t* p = data_ + offset_;
    offset_ += static_cast<size_t>(n);
    return p;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t offset_ = 0;
};

std::string printable_prefix(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, 80)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > 80) out += "...";
  return out;
}

// Reads a length-prefixed text field with a fixed upper bound.
bool read_text(Reader& r, const char* what, uint32_t max_len, std::string* out,
               std::string* problem) {
  uint32_t len = 0;
  if (!r.u32(&len)) {
    *problem = fmt::format("truncated: file ends inside the {} length field (at byte {})", what,
                           r.offset());
    return false;
  }
  if (len > max_len) {
    *problem = fmt::format("{} length {} exceeds the limit of {} bytes", what, len, max_len);
    return false;
  }
  const uint8_t* p = r.take(len);
  if (!p) {
    *problem = fmt::format("truncated: {} length is {} but only {} bytes remain", what, len,
                           r.remaining());
    return false;
  }
  out->assign(reinterpret_cast<const char*>(p), len);
  return true;
}

bool fail(std::string* problem, std::string text) {
  if (problem) *problem = std::move(text);
  return false;
}

// Parses the header; on success `entry` holds key and metadata, and the reader sits at the
// payload.
bool decode_header(Reader& r, const std::vector<uint8_t>& bytes, CacheEntry* entry,
                   uint64_t* payload_size, uint64_t* payload_hash, std::string* problem) {
  const uint8_t* magic = r.take(sizeof(kMagic));
  if (!magic) {
    return fail(problem, fmt::format("truncated: {} bytes is shorter than the {}-byte magic",
                                     bytes.size(), sizeof(kMagic)));
  }
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    return fail(problem, "bad magic: the file does not start with \"MLAJITC\\0\"");
  }
  uint32_t version = 0;
  if (!r.u32(&version)) return fail(problem, "truncated: file ends inside the format version");
  if (version != kCacheFormatVersion) {
    return fail(problem, fmt::format("format version {} is not the supported version {}",
                                     version, kCacheFormatVersion));
  }
  if (!read_text(r, "key text", kMaxKeyTextBytes, &entry->key_text, problem)) return false;
  if (!read_text(r, "metadata", kMaxMetadataBytes, &entry->metadata, problem)) return false;
  if (!r.u64(payload_size) || !r.u64(payload_hash)) {
    return fail(problem, "truncated: file ends inside the payload size/checksum fields");
  }
  const size_t header_end = r.offset();
  uint64_t header_hash = 0;
  if (!r.u64(&header_hash)) return fail(problem, "truncated: file ends inside the header checksum");
  const uint64_t actual = XXH3_64bits(bytes.data(), header_end);
  if (actual != header_hash) {
    return fail(problem, fmt::format("header checksum mismatch: stored {:016x}, computed {:016x}",
                                     header_hash, actual));
  }
  return true;
}

}  // namespace

CacheKey CacheKey::from_text(const std::string& text) {
  const XXH128_hash_t hash = XXH3_128bits(text.data(), text.size());
  CacheKey key;
  key.text = text;
  key.hex = fmt::format("{:016x}{:016x}", hash.high64, hash.low64);
  return key;
}

uint64_t CacheKey::seed() const {
  // The low 64 bits are the last 16 hex digits (see from_text); parse rather than rehash so
  // the seed always agrees with the file name.
  if (hex.size() != 32) return XXH3_128bits(text.data(), text.size()).low64;
  uint64_t v = 0;
  for (char c : hex.substr(16)) {
    v = (v << 4) | uint64_t(c <= '9' ? c - '0' : c - 'a' + 10);
  }
  return v;
}

std::vector<uint8_t> encode_cache_entry(const CacheEntry& entry) {
  // Refuse what decode would reject, so a written entry always reads back.
  if (entry.key_text.size() > kMaxKeyTextBytes || entry.metadata.size() > kMaxMetadataBytes ||
      entry.payload.size() > kMaxEntryFileBytes / 2) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("cache entry too large: key text {} B (max {}), metadata {} B (max {}), "
                            "payload {} B (max {})",
                            entry.key_text.size(), kMaxKeyTextBytes, entry.metadata.size(),
                            kMaxMetadataBytes, entry.payload.size(), kMaxEntryFileBytes / 2));
  }
  std::vector<uint8_t> out;
  out.reserve(64 + entry.key_text.size() + entry.metadata.size() + entry.payload.size());
  put_bytes(out, kMagic, sizeof(kMagic));
  put_u32(out, kCacheFormatVersion);
  put_u32(out, static_cast<uint32_t>(entry.key_text.size()));
  put_bytes(out, entry.key_text.data(), entry.key_text.size());
  put_u32(out, static_cast<uint32_t>(entry.metadata.size()));
  put_bytes(out, entry.metadata.data(), entry.metadata.size());
  put_u64(out, entry.payload.size());
  put_u64(out, XXH3_64bits(entry.payload.data(), entry.payload.size()));
  put_u64(out, XXH3_64bits(out.data(), out.size()));
  put_bytes(out, entry.payload.data(), entry.payload.size());
  return out;
}

std::optional<CacheEntry> decode_cache_entry(const std::vector<uint8_t>& bytes,
                                             const std::string& expected_key_text,
                                             std::string* problem) {
  std::string scratch;
  if (!problem) problem = &scratch;
  Reader r(bytes);
  CacheEntry entry;
  uint64_t payload_size = 0, payload_hash = 0;
  if (!decode_header(r, bytes, &entry, &payload_size, &payload_hash, problem)) return std::nullopt;
  if (!expected_key_text.empty() && entry.key_text != expected_key_text) {
    fail(problem, fmt::format("key mismatch: the entry holds key \"{}\", expected \"{}\"",
                              printable_prefix(entry.key_text), printable_prefix(expected_key_text)));
    return std::nullopt;
  }
  if (payload_size != r.remaining()) {
    fail(problem, fmt::format("{}: header says the payload is {} bytes, the file holds {}",
                              payload_size > r.remaining() ? "truncated" : "trailing bytes",
                              payload_size, r.remaining()));
    return std::nullopt;
  }
  const uint8_t* payload = r.take(payload_size);
  const uint64_t actual = XXH3_64bits(payload, static_cast<size_t>(payload_size));
  if (actual != payload_hash) {
    fail(problem, fmt::format("payload checksum mismatch: stored {:016x}, computed {:016x}",
                              payload_hash, actual));
    return std::nullopt;
  }
  entry.payload.assign(payload, payload + payload_size);
  problem->clear();
  return entry;
}

}  // namespace mlajit::jit
