#pragma once
// Limits of the entry file format (see cache_entry_format.cpp for the layout). The functions
// themselves, encode_cache_entry and decode_cache_entry, are declared in disk_cache.h.
#include <cstdint>

namespace mlajit::jit {

constexpr uint32_t kCacheFormatVersion = 1;
// Bounds checked before anything is allocated: a key text is a few KiB, metadata less, and a
// cubin for one kernel a few MiB; anything far beyond is corruption, not a real entry.
constexpr uint32_t kMaxKeyTextBytes = 1u << 20;             // 1 MiB
constexpr uint32_t kMaxMetadataBytes = 16u << 20;           // 16 MiB
constexpr uint64_t kMaxEntryFileBytes = uint64_t(1) << 30;  // 1 GiB, checked before reading

}  // namespace mlajit::jit
