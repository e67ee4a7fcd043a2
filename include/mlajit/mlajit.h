/* mlajit C ABI: batched Multi-head Latent Attention over a paged, compressed KV cache, for
 * programs in C and for language bindings (Python ctypes, Rust, Go, ...). Pure C99; also
 * compiles as C++. Everything the C++ API (attention.h, runtime.h, device_memory.h) can do.
 *
 * Rules of the ABI
 * - Every function returns mlajit_status (MLAJIT_OK = 0) unless it cannot fail. No C++
 *   exception crosses it; out-of-memory is MLAJIT_ERROR_OUT_OF_MEMORY.
 * - mlajit_last_error() is the message of the last call made on the calling thread: "" after
 *   a success, and after a failure a sentence naming what was wrong, the value and what would
 *   be right. The pointer stays valid until that thread's next mlajit call.
 * - Structs passed in or out start with `struct_size`: set it with the *_init() macro (or to
 *   sizeof(the struct)). A later version of this header may append fields; the library then
 *   reads only the first struct_size bytes and uses defaults for the rest. A struct_size
 *   smaller than this version's first layout is MLAJIT_ERROR_INVALID_ARGUMENT; one larger than
 *   the loaded library knows is MLAJIT_ERROR_UNSUPPORTED (the program was built against a
 *   newer mlajit.h than the library it runs with).
 * - Streams are CUstream / cudaStream_t values passed as void*; NULL is the legacy default
 *   stream. Device pointers are plain addresses (void*).
 * - Threads: a handle must not be used by two threads at once; distinct handles may, and the
 *   process-wide functions are thread-safe.
 * - Nothing here loads CUDA at library load time: without a driver, the calls that need a GPU
 *   fail with MLAJIT_ERROR_NO_DRIVER and say why; version, spec and precompile calls work.
 */
#ifndef MLAJIT_MLAJIT_H_
#define MLAJIT_MLAJIT_H_

#include <stddef.h>
#include <stdint.h>

#include "mlajit/export.h"
#include "mlajit/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes: 1..10 mirror mlajit::ErrorCode. */
typedef enum mlajit_status {
  MLAJIT_OK = 0,
  MLAJIT_ERROR_INVALID_ARGUMENT = 1, /* a value outside what is documented */
  MLAJIT_ERROR_UNSUPPORTED = 2,      /* valid, but this build or device cannot serve it */
  MLAJIT_ERROR_NO_DRIVER = 3,        /* libcuda.so.1 could not be loaded, or cuInit failed */
  MLAJIT_ERROR_NO_DEVICE = 4,        /* no CUDA device, or the ordinal is out of range */
  MLAJIT_ERROR_CUDA = 5,             /* a CUDA driver call failed */
  MLAJIT_ERROR_NO_COMPILER = 6,      /* libnvrtc could not be loaded */
  MLAJIT_ERROR_COMPILE = 7,          /* NVRTC rejected the program (log in the message) */
  MLAJIT_ERROR_CACHE_MISS = 8,       /* MLAJIT_NO_JIT is set and no cache holds the kernel */
  MLAJIT_ERROR_IO = 9,               /* a file operation failed */
  MLAJIT_ERROR_INTERNAL = 10,        /* a broken invariant inside the library: please report */
  MLAJIT_ERROR_OUT_OF_MEMORY = 11,   /* host memory ran out */
  /* Not values: they give the enum the full range of int, so that a caller passing any int
     (a newer library's code, garbage) is defined behaviour and gets a clear error. */
  MLAJIT_STATUS_MIN_ENUM_ = -0x7fffffff - 1,
  MLAJIT_STATUS_MAX_ENUM_ = 0x7fffffff
} mlajit_status;

/* The _ENUM_ entries are not values; they give each enum the full range of int (see above). */
typedef enum mlajit_dtype {
  MLAJIT_FLOAT16 = 0,
  MLAJIT_BFLOAT16 = 1,
  MLAJIT_FLOAT8_E4M3 = 2,    /* a KV-cache format only (mlajit_shape.kv_dtype); since 0.2.0 */
  MLAJIT_KV_DTYPE_SAME = -1, /* mlajit_shape.kv_dtype only: the shape's dtype */
  MLAJIT_DTYPE_MIN_ENUM_ = -0x7fffffff - 1,
  MLAJIT_DTYPE_MAX_ENUM_ = 0x7fffffff
} mlajit_dtype;
/* How an e4m3 KV cache is scaled (mlajit_shape.kv_scales): one scale per tensor for ckv and
 * kpe, or DeepSeek-V3.2's layout, one float32 scale per 128 ckv values of each token
 * (mlajit_run_args.ckv_scales) with kpe unquantized in the shape's dtype. */
typedef enum mlajit_kv_scales {
  MLAJIT_KV_SCALES_PER_TENSOR = 0,
  MLAJIT_KV_SCALES_PER_TOKEN_128 = 1,
  MLAJIT_KV_SCALES_MIN_ENUM_ = -0x7fffffff - 1,
  MLAJIT_KV_SCALES_MAX_ENUM_ = 0x7fffffff
} mlajit_kv_scales;
typedef enum mlajit_lse_base {
  MLAJIT_LSE_BASE2 = 0,
  MLAJIT_LSE_NATURAL = 1,
  MLAJIT_LSE_BASE_MIN_ENUM_ = -0x7fffffff - 1,
  MLAJIT_LSE_BASE_MAX_ENUM_ = 0x7fffffff
} mlajit_lse_base;
/* Where a kernel compiles on a cache miss (see mlajit/compile_mode.h): a helper process turns
 * an NVRTC crash or hang into MLAJIT_ERROR_COMPILE instead of taking the caller down. */
typedef enum mlajit_compile_mode {
  MLAJIT_COMPILE_DEFAULT = 0, /* the process-wide MLAJIT_COMPILE_MODE, else AUTO */
  MLAJIT_COMPILE_AUTO = 1,    /* a helper process; in-process (one warning) where none starts */
  MLAJIT_COMPILE_PROCESS = 2, /* always a helper process; none starting is NO_COMPILER */
  MLAJIT_COMPILE_INLINE = 3,  /* in the calling process */
  MLAJIT_COMPILE_MODE_MIN_ENUM_ = -0x7fffffff - 1,
  MLAJIT_COMPILE_MODE_MAX_ENUM_ = 0x7fffffff
} mlajit_compile_mode;

/* ---- version and errors ------------------------------------------------------------- */

/* The loaded library's version, e.g. "0.2.0" (MLAJIT_VERSION_STRING is the header's). */
MLAJIT_API const char* mlajit_version(void);
/* The same as numbers; any pointer may be NULL. */
MLAJIT_API void mlajit_version_numbers(int* major, int* minor, int* patch);
/* The last message on this thread ("" after a success). Never NULL. */
MLAJIT_API const char* mlajit_last_error(void);
/* A short name of a status: "ok", "invalid argument", ... Never NULL. */
MLAJIT_API const char* mlajit_status_name(mlajit_status status);

/* ---- the attention object -------------------------------------------------------------- */

typedef struct mlajit_attention mlajit_attention_t; /* opaque */

/* What an attention object computes; fixed for its life. Defaults: DeepSeek-V3 (128 heads,
 * ckv 512, kpe 64, page 64, bf16, not causal). */
typedef struct mlajit_shape {
  size_t struct_size;
  int32_t num_heads;    /* query heads, 1..128 */
  int32_t head_dim_ckv; /* 512 (with kpe 64) or 256 (with kpe 32) */
  int32_t head_dim_kpe;
  int32_t page_size;    /* KV tokens per page, >= 1 */
  mlajit_dtype dtype;   /* of q and the output: MLAJIT_BFLOAT16 or MLAJIT_FLOAT16 */
  int32_t causal;       /* 0/1; bottom-right aligned */
  /* Appended in 0.2.0; a struct_size without it (an older header) is still accepted. */
  mlajit_dtype kv_dtype; /* of the KV cache; MLAJIT_KV_DTYPE_SAME (default): dtype */
  int32_t reserved;      /* names the tail padding, never read: kv_scales starts past every byte
                            a program built before it covers */
  /* Appended after the tail padding; a struct_size without it is still accepted. */
  mlajit_kv_scales kv_scales; /* of an e4m3 KV cache; default MLAJIT_KV_SCALES_PER_TENSOR */
} mlajit_shape;

typedef struct mlajit_options {
  size_t struct_size;
  int32_t device;             /* CUDA ordinal; -1: the current context's device, else 0 */
  int32_t force_tier;         /* 0: from the device's shared memory; 1..3: force (debug) */
  int32_t cluster_size;       /* 0: per plan; 1 or 2: pinned grid (use with CUDA graphs) */
  int32_t force_two_launch;   /* 0/1: the non-cooperative attention + merge path */
  mlajit_lse_base lse_base;
  uint64_t workspace_bytes;   /* device workspace reserved up front (0: grow on demand) */
  int32_t validate_kv_indices; /* 0/1: plan() checks every host page id against num_pages */
  /* Appended in 0.2.0; a struct_size without them (an older header) is still accepted. */
  const char* kernel; /* kernel family: NULL or "auto" (the best for the shape and device), or a
                         name from mlajit_kernel_family_get(); read during create only */
  mlajit_compile_mode compile_mode; /* where this object's kernel compiles on a cache miss */
  int32_t reserved;   /* names the tail padding, never read: a field appended later then starts
                         past every byte an older program's struct_size covers */
  /* Appended in 0.2.0, after the tail padding; a struct_size without them is still accepted. */
  int32_t batch_invariant;        /* 0/1: a request's bits do not depend on the rest of the batch */
  int32_t invariant_chunk_tokens; /* 0: 2048; else a multiple of 64 (with batch_invariant) */
} mlajit_options;

/* Ragged batch: host arrays, read during mlajit_attention_plan() only. */
typedef struct mlajit_batch {
  size_t struct_size;
  const int32_t* qo_indptr;  /* [batch_size + 1] query-token offsets, qo_indptr[0] = 0 */
  const int32_t* kv_indptr;  /* [batch_size + 1] offsets into kv_indices (pages) */
  const int32_t* kv_len;     /* [batch_size] valid KV tokens of each request */
  int32_t batch_size;
  const int32_t* kv_indices; /* host copy; required with validate_kv_indices */
  int64_t num_pages;         /* pages in the cache; required with validate_kv_indices */
} mlajit_batch;

/* Device pointers and strides in ELEMENTS for one run. The last dimension of every tensor is
 * contiguous; pointers 16-byte aligned, strides multiples of 16 bytes (8 elements of a 16-bit
 * dtype, 16 of an e4m3 KV cache). */
typedef struct mlajit_run_args {
  size_t struct_size;
  const void* q_nope; /* [num_tokens][num_heads][head_dim_ckv] */
  int64_t q_nope_stride_token, q_nope_stride_head;
  const void* q_pe;   /* [num_tokens][num_heads][head_dim_kpe] */
  int64_t q_pe_stride_token, q_pe_stride_head;
  const void* ckv;    /* [num_pages][page_size][head_dim_ckv] */
  int64_t ckv_stride_page, ckv_stride_token;
  const void* kpe;    /* [num_pages][page_size][head_dim_kpe] */
  int64_t kpe_stride_page, kpe_stride_token;
  const int32_t* kv_indices; /* device page ids, CSR by the plan's kv_indptr */
  void* out;          /* [num_tokens][num_heads][head_dim_ckv], dtype of the shape */
  int64_t out_stride_token, out_stride_head;
  float* lse;         /* optional (NULL), float32 [num_tokens][num_heads] dense */
  int64_t num_tokens; /* must equal qo_indptr[batch_size] of the plan */
  float sm_scale;     /* softmax scale, e.g. 1/sqrt(192) for DeepSeek */
  int32_t reserved;   /* names the 0.1 layout's tail padding, never read: the fields below start
                         past every byte an older program's struct_size covers */
  /* Appended in 0.2.0; a struct_size without them (an older header) is still accepted.
   * Dequantization of an e4m3 KV cache (shape kv_dtype MLAJIT_FLOAT8_E4M3): the kernel reads
   * ckv * scale and kpe * scale. Each scale is a float (finite, > 0) or a device pointer to one
   * float32 read at run time (a captured CUDA graph follows its updates), then with its float
   * left at 1. A 16-bit KV cache takes neither: floats 1, pointers NULL. */
  float kv_scale_ckv; /* default 1 */
  float kv_scale_kpe; /* default 1 */
  const float* kv_scale_ckv_device; /* NULL (default) or 4-byte aligned */
  const float* kv_scale_kpe_device;
  /* Appended after 0.2.0's first layout; a struct_size without them is still accepted.
   * Shape kv_scales MLAJIT_KV_SCALES_PER_TOKEN_128 only (then required, with the four fields
   * above at their defaults): ckv value c of a token is its code x ckv_scales[page][token][c /
   * 128]; float32, 16-byte aligned, strides in floats (multiples of 4); kpe is then of the
   * shape's dtype (its strides in its elements). DeepSeek-V3.2's 656-byte token rows of one
   * buffer `row`: ckv = row, ckv_scales = row + 512 bytes, kpe = row + 528 bytes; token strides
   * 656 (ckv), 164 (ckv_scales), 328 (kpe). */
  const float* ckv_scales; /* NULL (default): [num_pages][page_size][head_dim_ckv / 128] */
  int64_t ckv_scales_stride_page, ckv_scales_stride_token;
} mlajit_run_args;

typedef struct mlajit_plan_info {
  size_t struct_size;
  int32_t cluster_size, grid_ctas, work_items, split_tiles_rows;
  int32_t tier;       /* 1..3 */
  int32_t two_launch; /* 0/1 */
  double busiest_to_mean;
  /* Appended in 0.1.1; a struct_size without them (an older header) is still accepted. */
  uint64_t workspace_bytes;        /* device workspace allocated now */
  uint64_t workspace_bytes_needed; /* the smallest options.workspace_bytes holding this plan */
} mlajit_plan_info;

/* Fill a struct with its defaults and struct_size: mlajit_shape_init(&shape) and the like are
 * macros that pass sizeof the program's struct, so that a newer library (whose struct may have
 * grown) writes no byte past it. The *_init_sized functions return MLAJIT_ERROR_INVALID_ARGUMENT
 * for a NULL struct or a size below the struct's first layout, MLAJIT_ERROR_UNSUPPORTED for one
 * larger than the library's (a newer header), and write nothing then. Bindings that mirror
 * the structs (ctypes, bindgen, cffi) call the *_init_sized functions with their struct's
 * size. */
MLAJIT_API mlajit_status mlajit_shape_init_sized(mlajit_shape* shape, size_t struct_size);
MLAJIT_API mlajit_status mlajit_options_init_sized(mlajit_options* options, size_t struct_size);
MLAJIT_API mlajit_status mlajit_batch_init_sized(mlajit_batch* batch, size_t struct_size);
MLAJIT_API mlajit_status mlajit_run_args_init_sized(mlajit_run_args* args, size_t struct_size);
#define mlajit_shape_init(shape) ((void)mlajit_shape_init_sized((shape), sizeof(*(shape))))
#define mlajit_options_init(options) \
  ((void)mlajit_options_init_sized((options), sizeof(*(options))))
#define mlajit_batch_init(batch) ((void)mlajit_batch_init_sized((batch), sizeof(*(batch))))
#define mlajit_run_args_init(args) ((void)mlajit_run_args_init_sized((args), sizeof(*(args))))
/* The unsized symbols of programs built against a header before the macros: they fill the
 * structs of that header (0.2.0's last layout) and no more, whatever this library's size. */
MLAJIT_API void(mlajit_shape_init)(mlajit_shape* shape);
MLAJIT_API void(mlajit_options_init)(mlajit_options* options);
MLAJIT_API void(mlajit_batch_init)(mlajit_batch* batch);
MLAJIT_API void(mlajit_run_args_init)(mlajit_run_args* args);

/* Builds the object: checks the shape, loads (or compiles) the kernel for the device. `options`
 * may be NULL (defaults). On failure *out is set to NULL. */
MLAJIT_API mlajit_status mlajit_attention_create(const mlajit_shape* shape,
                                                 const mlajit_options* options,
                                                 mlajit_attention_t** out);
/* NULL is a no-op. Waits for nothing: the caller keeps its runs' streams alive until done. */
MLAJIT_API void mlajit_attention_destroy(mlajit_attention_t* attention);
/* Host work + one async copy on `stream` whenever the batch changes; no device sync. */
MLAJIT_API mlajit_status mlajit_attention_plan(mlajit_attention_t* attention,
                                               const mlajit_batch* batch, void* stream);
/* Launches on `stream`; CUDA-graph capturable. */
MLAJIT_API mlajit_status mlajit_attention_run(mlajit_attention_t* attention,
                                              const mlajit_run_args* args, void* stream);
MLAJIT_API mlajit_status mlajit_attention_plan_info(const mlajit_attention_t* attention,
                                                    mlajit_plan_info* info);
/* The kernel spec text the object runs, NUL-terminated into buffer[size]; *needed (may be
 * NULL) gets the length + 1. A too-small buffer is MLAJIT_ERROR_INVALID_ARGUMENT. */
MLAJIT_API mlajit_status mlajit_attention_spec_text(const mlajit_attention_t* attention,
                                                    char* buffer, size_t size, size_t* needed);

/* ---- merging partial attention states -------------------------------------------------
 * Attentions of the same query rows over disjoint KV sets (cascade attention, context-parallel
 * decode) combined by their log-sum-exps into the attention over the union; see
 * mlajit/merge_states.h for the formula. A part with lse = -inf is empty: it contributes
 * nothing and its out is not read; rows whose parts are all empty get out = 0, lse = -inf. */

#define MLAJIT_MAX_MERGE_STATE_PARTS 64

/* One part: an element of the parts array. Its layout is fixed (arrays have no struct_size);
 * should a part ever need more, a new struct and function will come beside these. */
typedef struct mlajit_attention_state {
  const void* out; /* [num_tokens][num_heads][head_dim], 16-byte aligned */
  int64_t out_stride_token, out_stride_head; /* elements, multiples of 8 */
  const float* lse; /* [num_tokens][num_heads] float32 dense, as mlajit_attention_run writes */
} mlajit_attention_state;

typedef struct mlajit_merge_states_args {
  size_t struct_size;
  const mlajit_attention_state* parts; /* host array of num_parts */
  int32_t num_parts;                   /* 1..MLAJIT_MAX_MERGE_STATE_PARTS */
  void* out;                           /* like a part's out; may be a part's own (same strides) */
  int64_t out_stride_token, out_stride_head;
  float* lse;                          /* optional (NULL); may be a part's lse */
  int64_t num_tokens;                  /* 0: nothing is launched */
  int32_t num_heads;                   /* >= 1 */
  int32_t head_dim;                    /* multiple of 8 in 8..65536; default 512 */
  mlajit_dtype dtype;                  /* MLAJIT_BFLOAT16 (default) or MLAJIT_FLOAT16 */
  mlajit_lse_base lse_base;            /* of every lse, in and out; default MLAJIT_LSE_BASE2 */
  int32_t device;                      /* -1 (default): the current context's device, else 0 */
} mlajit_merge_states_args;

/* Defaults and struct_size, as mlajit_shape_init (a macro passing sizeof; the unsized symbol
 * for programs built before it). */
MLAJIT_API mlajit_status mlajit_merge_states_args_init_sized(mlajit_merge_states_args* args,
                                                             size_t struct_size);
#define mlajit_merge_states_args_init(args) \
  ((void)mlajit_merge_states_args_init_sized((args), sizeof(*(args))))
MLAJIT_API void(mlajit_merge_states_args_init)(mlajit_merge_states_args* args);
/* One launch on `stream`; CUDA-graph capturable. Every argument is checked first. */
MLAJIT_API mlajit_status mlajit_merge_states(const mlajit_merge_states_args* args, void* stream);

/* ---- devices and tile configs ---------------------------------------------------------- */

typedef struct mlajit_device_info {
  size_t struct_size;
  int32_t ordinal;
  char name[256];
  char arch[32];   /* "sm_90" */
  int32_t cc_major, cc_minor, sm_count;
  int32_t smem_per_sm, smem_per_block_optin; /* bytes */
  int32_t cooperative_launch;                /* 0/1 */
} mlajit_device_info;

typedef struct mlajit_tile_info {
  size_t struct_size;
  int32_t num_stages, kv_tile, qk_shard, q_tile;
  int32_t tier;         /* 1..3; 0: the family has no tiers */
  int32_t shared_bytes; /* dynamic shared memory of one CTA */
  char spec_text[512];
  /* Appended in 0.2.0; a struct_size without it (an older header) is still accepted. */
  char family[64];      /* the kernel family, e.g. "portable" */
} mlajit_tile_info;

/* A kernel family: one way of computing MLA on a class of GPUs (mlajit_options.kernel). */
typedef struct mlajit_kernel_family_info {
  size_t struct_size;
  char name[64];        /* e.g. "portable"; also the first field of its spec texts */
  char summary[512];
  char head_dims[256];  /* the CKV/KPE pairs it computes, ','-joined: "512/64,256/32" */
  char archs[512];      /* the profiled archs it serves, ','-joined: "sm_80,sm_86,..." */
} mlajit_kernel_family_info;

/* 1 when the CUDA driver loads and initialises, else 0 (the reason: mlajit_last_error()). */
MLAJIT_API int mlajit_driver_available(void);
MLAJIT_API mlajit_status mlajit_device_count(int* count);
MLAJIT_API mlajit_status mlajit_device_info_get(int ordinal, mlajit_device_info* info);
/* The families, in the order "auto" prefers them: index 0 .. count - 1. No GPU needed. */
MLAJIT_API mlajit_status mlajit_kernel_family_count(int* count);
MLAJIT_API mlajit_status mlajit_kernel_family_get(int index, mlajit_kernel_family_info* info);
/* The kernel (family, tile config, spec) a shape gets on a device, or on an arch's built-in
 * profile (no GPU). */
MLAJIT_API mlajit_status mlajit_tile_for_device(int ordinal, const mlajit_shape* shape,
                                                mlajit_tile_info* info);
MLAJIT_API mlajit_status mlajit_tile_for_arch(const char* arch, const mlajit_shape* shape,
                                              mlajit_tile_info* info);

/* ---- kernel cache ---------------------------------------------------------------------- */

typedef struct mlajit_cache_stats {
  size_t struct_size;
  uint64_t memory_hits, disk_hits, misses, builds, bad_entries;
  double build_seconds;
  int32_t user_dir_writable, no_jit; /* 0/1 */
  char user_dir[4096];               /* "" = memory only; truncated if longer */
  /* Appended in 0.1.1; a struct_size without it (an older header) is still accepted. */
  char read_only_dirs[4096]; /* the shipped layers, ':'-joined as in MLAJIT_CACHE_PATH */
} mlajit_cache_stats;

typedef struct mlajit_precompile_result {
  size_t struct_size;
  int32_t from_cache;     /* 1: was cached already */
  uint64_t bytes;         /* cubin/PTX size */
  double compile_seconds;
  char key[64];           /* cache key, hex */
} mlajit_precompile_result;

MLAJIT_API mlajit_status mlajit_cache_stats_get(mlajit_cache_stats* stats);
/* Compiles the kernel of a spec text (as `mlajit list` prints, e.g. "portable;q=bf16;...;
 * arch=sm_90") into the cache. Needs NVRTC, no GPU. `result` may be NULL. */
MLAJIT_API mlajit_status mlajit_precompile(const char* spec_text,
                                           mlajit_precompile_result* result);

/* ---- device memory (for programs that link no CUDA library) ---------------------------- */

/* Synchronous; 0 bytes gives *ptr = NULL. */
MLAJIT_API mlajit_status mlajit_device_alloc(int ordinal, size_t bytes, void** ptr);
/* NULL is a no-op; a pointer not from mlajit_device_alloc is MLAJIT_ERROR_INVALID_ARGUMENT. */
MLAJIT_API mlajit_status mlajit_device_free(void* ptr);
MLAJIT_API mlajit_status mlajit_memcpy_to_device(void* device_dst, const void* host_src,
                                                 size_t bytes);
MLAJIT_API mlajit_status mlajit_memcpy_to_host(void* host_dst, const void* device_src,
                                               size_t bytes);
MLAJIT_API mlajit_status mlajit_device_synchronize(int ordinal);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLAJIT_MLAJIT_H_ */
