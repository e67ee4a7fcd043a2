// The hopper kernel's second parameter, after MlaParams (common/mla_params.cuh): compiled by
// the host C++ compiler (the hopper family encodes it for every run) and by NVRTC, so it uses
// only fixed-width integer types. Its layout is part of the cache key, like MlaParams'.
#pragma once
#include "common/tensor_map.cuh"

namespace mlajit_kernel {

// Tensor maps of the paged cache as [page][token][column], used when every KV tile lies
// inside one page (page_size a multiple of 64) or is made of whole pages (page_size dividing
// 64); tiles start on multiples of 64 tokens, which the planner guarantees. Otherwise
// `enabled` is 0 and the kernel gathers the tiles.
// `split_copies` (with `enabled`): the last regions of each tile come through the producer
// threads' cp.async beside the TMA boxes of the others, for launches bound by memory (few
// query rows per CTA), where it puts more bytes in flight.
struct HopperTma {
  TensorMapBytes ckv;  // box 64 columns x box_tokens tokens x 1 page, 128-byte swizzle
  TensorMapBytes kpe;
  int32_t enabled;
  int32_t box_tokens;  // 64, or the page size where pages are smaller: one box per page
  int32_t split_copies;
};

}  // namespace mlajit_kernel
