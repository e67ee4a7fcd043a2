#pragma once
// Minimal device-memory helpers, so that a program can feed BatchMlaAttention without
// linking the CUDA runtime or driver itself (the examples, the C ABI, quick tests).
// Engines that own their memory (PyTorch, a custom allocator) do not need these.
// All calls are synchronous and thread-safe; they throw mlajit::Error (kNoDriver, kNoDevice,
// kCudaError, kInvalidArgument).
#include <cstddef>

#include "mlajit/export.h"

namespace mlajit {

// `bytes` of device memory on device `ordinal` (its primary context, as the CUDA runtime
// uses). Returns nullptr for 0 bytes. Pointers are 256-byte aligned.
MLAJIT_API void* device_alloc(int ordinal, size_t bytes);
// Frees a pointer from device_alloc; nullptr is a no-op, any other pointer is
// Error(kInvalidArgument).
MLAJIT_API void device_free(void* ptr);
// Blocking copies (they wait for the legacy default stream's work first).
MLAJIT_API void copy_to_device(void* device_dst, const void* host_src, size_t bytes);
MLAJIT_API void copy_to_host(void* host_dst, const void* device_src, size_t bytes);
// Between two device buffers (any devices: unified addressing). Blocking like the copies above.
MLAJIT_API void copy_device_to_device(void* device_dst, const void* device_src, size_t bytes);
// Sets `bytes` bytes at `device_dst` to `value`, and waits for it (0xFF gives NaN in bf16,
// fp16 and float32: a poison that shows which outputs a kernel never wrote).
MLAJIT_API void device_memset(void* device_dst, unsigned char value, size_t bytes);
// Waits until all work on device `ordinal` has finished; reports an asynchronous kernel
// failure as Error(kCudaError).
MLAJIT_API void device_synchronize(int ordinal);

}  // namespace mlajit
