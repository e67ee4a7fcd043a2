"""ctypes declarations of the mlajit C ABI (include/mlajit/mlajit.h) and the library loader.

The structures mirror the C header field by field; each starts with ``struct_size``, which
``new(StructType)`` fills in. The library is loaded lazily, on the first call that needs it, so
that the argument checks can be used (and tested) without it.
"""
import ctypes
import ctypes.util
import os
import struct
import threading

c_int32, c_int64, c_uint64, c_size_t = ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64, ctypes.c_size_t
c_void_p, c_float, c_double, c_char_p = ctypes.c_void_p, ctypes.c_float, ctypes.c_double, ctypes.c_char_p
c_int32_p = ctypes.POINTER(c_int32)

# mlajit_status values (1..10 mirror mlajit::ErrorCode).
OK = 0
STATUS_NAMES = {
    1: "INVALID_ARGUMENT", 2: "UNSUPPORTED", 3: "NO_DRIVER", 4: "NO_DEVICE", 5: "CUDA",
    6: "NO_COMPILER", 7: "COMPILE", 8: "CACHE_MISS", 9: "IO", 10: "INTERNAL", 11: "OUT_OF_MEMORY",
}
FLOAT16, BFLOAT16, FLOAT8_E4M3 = 0, 1, 2
KV_DTYPE_SAME = -1  # Shape.kv_dtype: the shape's dtype
# mlajit_kv_scales (Shape.kv_scales): how an e4m3 KV cache is scaled. Per tensor (RunArgs'
# kv_scale_* fields), or DeepSeek-V3.2's one float32 scale per 128 ckv values of each token
# (RunArgs.ckv_scales) with kpe unquantized in the shape's dtype.
KV_SCALES_PER_TENSOR, KV_SCALES_PER_TOKEN_128 = 0, 1
LSE_BASE2, LSE_NATURAL = 0, 1
# mlajit_compile_mode, by the names MLAJIT_COMPILE_MODE takes ("default": follow it).
COMPILE_MODES = {"default": 0, "auto": 1, "process": 2, "inline": 3}


class Shape(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("num_heads", c_int32), ("head_dim_ckv", c_int32),
                ("head_dim_kpe", c_int32), ("page_size", c_int32), ("dtype", ctypes.c_int),
                ("causal", c_int32), ("kv_dtype", ctypes.c_int),
                # past the tail padding (`reserved`): how an e4m3 cache is scaled
                ("reserved", c_int32), ("kv_scales", ctypes.c_int)]


class Options(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("device", c_int32), ("force_tier", c_int32),
                ("cluster_size", c_int32), ("force_two_launch", c_int32), ("lse_base", ctypes.c_int),
                ("workspace_bytes", c_uint64), ("validate_kv_indices", c_int32),
                ("kernel", c_char_p), ("compile_mode", ctypes.c_int), ("reserved", c_int32),
                # 0.2.0, past the tail padding (`reserved`): batch-invariant plans
                ("batch_invariant", c_int32), ("invariant_chunk_tokens", c_int32)]


class Batch(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("qo_indptr", c_int32_p), ("kv_indptr", c_int32_p),
                ("kv_len", c_int32_p), ("batch_size", c_int32), ("kv_indices", c_int32_p),
                ("num_pages", c_int64)]


class RunArgs(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t),
                ("q_nope", c_void_p), ("q_nope_stride_token", c_int64), ("q_nope_stride_head", c_int64),
                ("q_pe", c_void_p), ("q_pe_stride_token", c_int64), ("q_pe_stride_head", c_int64),
                ("ckv", c_void_p), ("ckv_stride_page", c_int64), ("ckv_stride_token", c_int64),
                ("kpe", c_void_p), ("kpe_stride_page", c_int64), ("kpe_stride_token", c_int64),
                ("kv_indices", c_void_p),
                ("out", c_void_p), ("out_stride_token", c_int64), ("out_stride_head", c_int64),
                ("lse", c_void_p), ("num_tokens", c_int64), ("sm_scale", c_float),
                # 0.2.0: past the 0.1 tail padding (`reserved`), the FP8 KV scales
                ("reserved", c_int32), ("kv_scale_ckv", c_float), ("kv_scale_kpe", c_float),
                ("kv_scale_ckv_device", c_void_p), ("kv_scale_kpe_device", c_void_p),
                # appended after 0.2.0's first layout: the per-token scales of kv_scales
                # KV_SCALES_PER_TOKEN_128 (strides in floats)
                ("ckv_scales", c_void_p), ("ckv_scales_stride_page", c_int64),
                ("ckv_scales_stride_token", c_int64)]


# RunArgs written in one call (run()'s hot path): the struct module's native mode ("@") lays
# fields out as the C compiler does; _check_run_args_layout proves it field by field at import.
RUN_ARGS_PACK = struct.Struct("@N" + "Pqq" * 4 + "P" + "Pqq" + "P" + "q" + "f" + "iff" + "PP" +
                              "Pqq")


def _check_run_args_layout():
    codes = RUN_ARGS_PACK.format[1:]
    for (name, _), code_index in zip(RunArgs._fields_, range(len(codes))):
        prefix = "@" + codes[:code_index + 1]
        offset = struct.calcsize(prefix) - struct.calcsize("@" + codes[code_index])
        if offset != getattr(RunArgs, name).offset:
            raise ImportError(f"mlajit: RUN_ARGS_PACK puts {name} at byte {offset}, the C struct at "
                              f"{getattr(RunArgs, name).offset}: update it with RunArgs")
    if len(codes) != len(RunArgs._fields_):
        raise ImportError(f"mlajit: RUN_ARGS_PACK has {len(codes)} fields, RunArgs "
                          f"{len(RunArgs._fields_)}")


_check_run_args_layout()


class AttentionState(ctypes.Structure):
    """mlajit_attention_state: an element of the parts array (no struct_size: fixed layout)."""
    _fields_ = [("out", c_void_p), ("out_stride_token", c_int64), ("out_stride_head", c_int64),
                ("lse", c_void_p)]


class MergeStatesArgs(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("parts", ctypes.POINTER(AttentionState)),
                ("num_parts", c_int32), ("out", c_void_p), ("out_stride_token", c_int64),
                ("out_stride_head", c_int64), ("lse", c_void_p), ("num_tokens", c_int64),
                ("num_heads", c_int32), ("head_dim", c_int32), ("dtype", ctypes.c_int),
                ("lse_base", ctypes.c_int), ("device", c_int32)]


MAX_MERGE_STATE_PARTS = 64  # MLAJIT_MAX_MERGE_STATE_PARTS


class PlanInfo(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("cluster_size", c_int32), ("grid_ctas", c_int32),
                ("work_items", c_int32), ("split_tiles_rows", c_int32), ("tier", c_int32),
                ("two_launch", c_int32), ("busiest_to_mean", c_double),
                ("workspace_bytes", c_uint64), ("workspace_bytes_needed", c_uint64)]


class DeviceInfo(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("ordinal", c_int32), ("name", ctypes.c_char * 256),
                ("arch", ctypes.c_char * 32), ("cc_major", c_int32), ("cc_minor", c_int32),
                ("sm_count", c_int32), ("smem_per_sm", c_int32), ("smem_per_block_optin", c_int32),
                ("cooperative_launch", c_int32)]


class TileInfo(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("num_stages", c_int32), ("kv_tile", c_int32),
                ("qk_shard", c_int32), ("q_tile", c_int32), ("tier", c_int32),
                ("shared_bytes", c_int32), ("spec_text", ctypes.c_char * 512),
                ("family", ctypes.c_char * 64)]


class KernelFamilyInfo(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("name", ctypes.c_char * 64),
                ("summary", ctypes.c_char * 512), ("head_dims", ctypes.c_char * 256),
                ("archs", ctypes.c_char * 512)]


class CacheStats(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("memory_hits", c_uint64), ("disk_hits", c_uint64),
                ("misses", c_uint64), ("builds", c_uint64), ("bad_entries", c_uint64),
                ("build_seconds", c_double), ("user_dir_writable", c_int32), ("no_jit", c_int32),
                ("user_dir", ctypes.c_char * 4096), ("read_only_dirs", ctypes.c_char * 4096)]


class PrecompileResult(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("from_cache", c_int32), ("bytes", c_uint64),
                ("compile_seconds", c_double), ("key", ctypes.c_char * 64)]


def new(struct_type):
    """An instance with struct_size set (all other fields zero)."""
    value = struct_type()
    value.struct_size = ctypes.sizeof(struct_type)
    return value


class MlajitError(RuntimeError):
    """A failed mlajit call: ``code`` is the status name (e.g. "NO_DRIVER"), ``status`` its number."""

    def __init__(self, status, message):
        self.status = status
        self.code = STATUS_NAMES.get(status, "UNKNOWN")
        super().__init__(f"mlajit: {self.code.lower().replace('_', ' ')}: {message}")


_PROTOTYPES = {
    "mlajit_version": (c_char_p, []),
    "mlajit_last_error": (c_char_p, []),
    # Sized: the library writes no byte past the ctypes struct (ctypes.sizeof), whatever its own.
    "mlajit_shape_init_sized": (ctypes.c_int, [ctypes.POINTER(Shape), c_size_t]),
    "mlajit_options_init_sized": (ctypes.c_int, [ctypes.POINTER(Options), c_size_t]),
    "mlajit_attention_create": (ctypes.c_int, [ctypes.POINTER(Shape), ctypes.POINTER(Options),
                                               ctypes.POINTER(c_void_p)]),
    "mlajit_attention_destroy": (None, [c_void_p]),
    "mlajit_attention_plan": (ctypes.c_int, [c_void_p, ctypes.POINTER(Batch), c_void_p]),
    "mlajit_attention_run": (ctypes.c_int, [c_void_p, ctypes.POINTER(RunArgs), c_void_p]),
    "mlajit_attention_plan_info": (ctypes.c_int, [c_void_p, ctypes.POINTER(PlanInfo)]),
    "mlajit_attention_spec_text": (ctypes.c_int, [c_void_p, ctypes.c_char_p, c_size_t,
                                                  ctypes.POINTER(c_size_t)]),
    "mlajit_driver_available": (ctypes.c_int, []),
    "mlajit_device_count": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int)]),
    "mlajit_device_info_get": (ctypes.c_int, [ctypes.c_int, ctypes.POINTER(DeviceInfo)]),
    "mlajit_kernel_family_count": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int)]),
    "mlajit_kernel_family_get": (ctypes.c_int, [ctypes.c_int, ctypes.POINTER(KernelFamilyInfo)]),
    "mlajit_tile_for_device": (ctypes.c_int, [ctypes.c_int, ctypes.POINTER(Shape),
                                              ctypes.POINTER(TileInfo)]),
    "mlajit_tile_for_arch": (ctypes.c_int, [c_char_p, ctypes.POINTER(Shape), ctypes.POINTER(TileInfo)]),
    "mlajit_cache_stats_get": (ctypes.c_int, [ctypes.POINTER(CacheStats)]),
    "mlajit_precompile": (ctypes.c_int, [c_char_p, ctypes.POINTER(PrecompileResult)]),
    "mlajit_merge_states": (ctypes.c_int, [ctypes.POINTER(MergeStatesArgs), c_void_p]),
}

_lock = threading.Lock()
_library = None


def _candidates():
    explicit = os.environ.get("MLAJIT_LIBRARY")
    if explicit:
        return [explicit]  # when set, it is the only place looked at
    here = os.path.dirname(os.path.abspath(__file__))
    names = ["libmlajit.so", "libmlajit.so.0"]
    found = [os.path.join(here, name) for name in names if os.path.exists(os.path.join(here, name))]
    system = ctypes.util.find_library("mlajit")
    return found + ([system] if system else []) + names


def library():
    """The loaded libmlajit (MLAJIT_LIBRARY, else next to this package, else the loader path)."""
    global _library
    with _lock:
        if _library is not None:
            return _library
        tried = []
        for candidate in _candidates():
            try:
                loaded = ctypes.CDLL(candidate)
                break
            except OSError as error:
                tried.append(f"{candidate}: {error}")
        else:
            raise OSError("libmlajit.so could not be loaded; install mlajit with `pip install .` "
                          "from the source tree (the library goes inside the package), or set "
                          "MLAJIT_LIBRARY to its path, or put it on the loader path. Tried:\n  "
                          + "\n  ".join(tried))
        for name, (restype, argtypes) in _PROTOTYPES.items():
            function = getattr(loaded, name)
            function.restype, function.argtypes = restype, argtypes
        _library = loaded
        return _library


def bind(loaded, name, restype, argtypes):
    """A separate function object for `name` (CDLL[name] makes a new one), so its argtypes can
    differ from the shared prototype's: run()'s hot path passes plain integer addresses."""
    function = loaded[name]
    function.restype, function.argtypes = restype, argtypes
    return function


def check(status):
    """Raises MlajitError with the thread's last message unless status is OK."""
    if status != OK:
        raise MlajitError(status, library().mlajit_last_error().decode(errors="replace"))
