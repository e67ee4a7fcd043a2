"""BatchMlaAttention for Python: the C ABI through ctypes, on PyTorch tensors."""
import ctypes
import math
import numbers

from . import _capi
from . import _op_handles
from . import _streams
from . import _tensors as T

_DTYPES = {"bf16": T.BF16, "bfloat16": T.BF16, "f16": T.F16, "float16": T.F16, "half": T.F16,
           "e4m3": T.E4M3, "float8_e4m3fn": T.E4M3}
_C_DTYPES = {T.F16: _capi.FLOAT16, T.BF16: _capi.BFLOAT16, T.E4M3: _capi.FLOAT8_E4M3}
# kv_scales names (mlajit::kv_scales_name) -> mlajit_kv_scales
_KV_SCALES = {"tensor": _capi.KV_SCALES_PER_TENSOR, "token128": _capi.KV_SCALES_PER_TOKEN_128}
_CKV_SCALE_BLOCK = 128  # ckv values that share one scale under kv_scales="token128"


def _dtype_name(dtype, what="dtype"):
    text = str(dtype).replace("torch.", "")
    if text not in _DTYPES:
        raise TypeError(f"{what} {dtype!r} is not supported: expected bfloat16 or float16 (or "
                        f"float8_e4m3fn for the KV cache)")
    return _DTYPES[text]


def _checked_int(name, value, low, high, kind):
    """An int within [low, high]: ctypes would wrap one outside silently (2**32 + 7 -> 7)."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if not isinstance(value, int):
        try:
            as_int = int(value)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be an integer, got {value!r}") from None
        if as_int != value:
            raise TypeError(f"{name} must be an integer, got {value!r}")
        value = as_int
    if not low <= value <= high:
        raise ValueError(f"{name} is {value}: expected {kind} ({low} to {high})")
    return value


_INT32_MIN, _INT32_MAX = -2**31, 2**31 - 1


def _int32(name, value):
    return _checked_int(name, value, _INT32_MIN, _INT32_MAX, "an int32")


def _int64(name, value):
    return _checked_int(name, value, -2**63, 2**63 - 1, "an int64")


def _uint64(name, value):
    return _checked_int(name, value, 0, 2**64 - 1, "a uint64")


def _int32_array(name, values, length=None):
    """Host int32 array from a list, a numpy array or a CPU torch tensor."""
    if hasattr(values, "device") and getattr(values.device, "type", "cpu") != "cpu":
        raise ValueError(f"{name} must be on the host (plan() reads it on the CPU), got a tensor "
                         f"on {values.device}")
    if hasattr(values, "tolist"):
        values = values.tolist()
    values = list(values)
    # Fast path (plan() runs every step): plain ints within int32, checked at C speed; anything
    # else goes through the per-element check, which names the offending index.
    if not (all(type(v) is int for v in values) and
            (not values or (min(values) >= _INT32_MIN and max(values) <= _INT32_MAX))):
        values = [_int32(f"{name}[{i}]", v) for i, v in enumerate(values)]
    if length is not None and len(values) != length:
        raise ValueError(f"{name} has {len(values)} entries: expected {length}")
    return (ctypes.c_int32 * max(len(values), 1))(*values), len(values)


class ShapeSpec:
    """What a BatchMlaAttention computes (mirrors mlajit::MlaShape). `dtype` is that of the
    queries and the output; `kv_dtype` that of the KV cache (None: the same as dtype).
    `kv_scales`, how an e4m3 cache is scaled: "tensor" (default: one scale for ckv and one for
    kpe, run()'s kv_scale_ckv / kv_scale_kpe) or "token128" (DeepSeek-V3.2's layout: one
    float32 scale per 128 ckv values of each token, run()'s ckv_scales, and kpe unquantized in
    `dtype`; needs kv_dtype e4m3)."""

    def __init__(self, num_heads=128, head_dim_ckv=512, head_dim_kpe=64, page_size=64,
                 dtype="bfloat16", causal=False, kv_dtype=None, kv_scales="tensor"):
        self.num_heads = _int32("num_heads", num_heads)
        self.head_dim_ckv = _int32("head_dim_ckv", head_dim_ckv)
        self.head_dim_kpe = _int32("head_dim_kpe", head_dim_kpe)
        self.page_size = _int32("page_size", page_size)
        self.dtype, self.causal = _dtype_name(dtype), bool(causal)
        self.kv_dtype = None if kv_dtype is None else _dtype_name(kv_dtype, "kv_dtype")
        if not isinstance(kv_scales, str) or kv_scales not in _KV_SCALES:
            raise ValueError(f"kv_scales={kv_scales!r}: expected one of "
                             f"{', '.join(map(repr, _KV_SCALES))}")
        if kv_scales == "token128" and self.cache_dtype != T.E4M3:
            raise ValueError(f"kv_scales='token128' scales an e4m3 KV cache per token, but this "
                             f"shape's KV cache is {self.cache_dtype}: expected "
                             f"kv_dtype='float8_e4m3fn'")
        self.kv_scales = kv_scales

    @property
    def cache_dtype(self):
        """The KV cache's dtype name: kv_dtype, or dtype when unset (ckv's dtype)."""
        return self.dtype if self.kv_dtype is None else self.kv_dtype

    @property
    def kpe_dtype(self):
        """kpe's dtype name: the cache's, except under kv_scales="token128", where kpe is not
        quantized and is of the shape's dtype (mlajit::MlaShape::kpe_dtype)."""
        return self.dtype if self.kv_scales == "token128" else self.cache_dtype

    def to_c(self):
        shape = _capi.new(_capi.Shape)
        shape.num_heads, shape.head_dim_ckv = self.num_heads, self.head_dim_ckv
        shape.head_dim_kpe, shape.page_size = self.head_dim_kpe, self.page_size
        shape.dtype = _C_DTYPES[self.dtype]
        shape.causal = int(self.causal)
        shape.kv_dtype = _capi.KV_DTYPE_SAME if self.kv_dtype is None else _C_DTYPES[self.kv_dtype]
        shape.kv_scales = _KV_SCALES[self.kv_scales]
        return shape


def make_run_args(shape, device, q_nope, q_pe, ckv, kpe, kv_indices, out, sm_scale, lse=None,
                  kv_scale_ckv=1.0, kv_scale_kpe=1.0, ckv_scales=None):
    """Checks the tensors against `shape` and returns the C run arguments. No GPU needed.

    q_nope [tokens, heads, ckv], q_pe [tokens, heads, kpe], ckv [pages, page_size, ckv],
    kpe [pages, page_size, kpe] (may be views into one [pages, page_size, ckv + kpe] cache),
    kv_indices int32 [n], out like q_nope, lse float32 [tokens, heads] contiguous or None.
    kv_scale_ckv/kpe: an e4m3 cache's per-tensor dequantization scales (see kv_scales).
    ckv_scales: under shape.kv_scales "token128" (and only then; required there), the float32
    per-token scales [pages, page_size, ckv // 128] (see check_ckv_scales)."""
    qn, qp, c, k, idx, o = (T.describe(name, value) for name, value in (
        ("q_nope", q_nope), ("q_pe", q_pe), ("ckv", ckv), ("kpe", kpe),
        ("kv_indices", kv_indices), ("out", out)))
    l = None if lse is None else T.describe("lse", lse)
    cs = None if ckv_scales is None else T.describe("ckv_scales", ckv_scales)
    tokens = check_run_tensors(shape, device, qn, qp, c, k, idx, o, l, cs)
    _require_sm_scale(sm_scale)
    scales = kv_scales(shape, device, kv_scale_ckv, kv_scale_kpe)
    args = _capi.new(_capi.RunArgs)
    args.q_nope, (args.q_nope_stride_token, args.q_nope_stride_head) = qn.ptr, qn.strides[:2]
    args.q_pe, (args.q_pe_stride_token, args.q_pe_stride_head) = qp.ptr, qp.strides[:2]
    args.ckv, (args.ckv_stride_page, args.ckv_stride_token) = c.ptr, c.strides[:2]
    args.kpe, (args.kpe_stride_page, args.kpe_stride_token) = k.ptr, k.strides[:2]
    args.kv_indices = idx.ptr
    args.out, (args.out_stride_token, args.out_stride_head) = o.ptr, o.strides[:2]
    args.lse = 0 if l is None else l.ptr
    args.num_tokens = tokens
    args.sm_scale = float(sm_scale)
    (args.kv_scale_ckv, args.kv_scale_kpe, args.kv_scale_ckv_device,
     args.kv_scale_kpe_device) = scales
    if cs is not None:
        args.ckv_scales = cs.ptr
        args.ckv_scales_stride_page, args.ckv_scales_stride_token = cs.strides[:2]
    return args


def check_run_tensors(shape, device, qn, qp, c, k, idx, o, l=None, cs=None):
    """make_run_args' checks on described tensors (_tensors.Tensor; l: lse or None; cs:
    ckv_scales or None); the torch op's fake implementation runs them too, at trace time.
    Returns the token count."""
    h, dc, dk, page = shape.num_heads, shape.head_dim_ckv, shape.head_dim_kpe, shape.page_size
    T.require(qn, shape.dtype, (None, h, dc), device)
    tokens = qn.shape[0]
    T.require(qp, shape.dtype, (tokens, h, dk), device)
    T.require(c, shape.cache_dtype, (None, page, dc), device)
    T.require(k, shape.kpe_dtype, (c.shape[0], page, dk), device)
    T.require(idx, T.I32, (None,), device)
    T.require(o, shape.dtype, (tokens, h, dc), device)
    for tensor, what in ((qn, "token, head"), (qp, "token, head"), (c, "page, token"),
                         (k, "page, token"), (o, "token, head")):
        T.require_rows(tensor, what)
    if l is not None:
        T.require(l, T.F32, (tokens, h), device)
        if tokens > 1 and l.strides[0] != h:
            raise ValueError(f"lse must be dense [num_tokens, num_heads]: strides {l.strides}")
    check_ckv_scales(shape, device, cs, c.shape[0])
    return tokens


def check_ckv_scales(shape, device, cs, pages):
    """ckv_scales (a described tensor or None) against `shape`: required under kv_scales
    "token128", a float32 [pages, page_size, head_dim_ckv // 128] tensor (pages: ckv's), its
    last dimension contiguous, its other strides multiples of 4 floats (16 bytes) and its start
    16-byte aligned, as DeepSeek-V3.2's 656-byte token rows give (scales at byte 512 of a row,
    token stride 164 floats); refused under per-tensor scales."""
    if shape.kv_scales != "token128":
        if cs is not None:
            raise ValueError("ckv_scales is given, but this object's KV cache is not scaled per "
                             "token: ckv_scales needs an object created with "
                             "kv_scales='token128' (and kv_dtype='float8_e4m3fn'); expected None")
        return
    blocks = shape.head_dim_ckv // _CKV_SCALE_BLOCK
    if cs is None:
        raise ValueError(f"ckv_scales is required with kv_scales='token128': a float32 CUDA "
                         f"tensor [pages, page_size, head_dim_ckv // {_CKV_SCALE_BLOCK}] = "
                         f"[{pages}, {shape.page_size}, {blocks}], one scale per "
                         f"{_CKV_SCALE_BLOCK} ckv values of each token")
    T.require(cs, T.F32, (pages, shape.page_size, blocks), device)
    T.require_rows(cs, "page, token")


def _require_sm_scale(sm_scale):
    if not (isinstance(sm_scale, (int, float)) and sm_scale > 0):  # also rejects None and NaN
        raise ValueError(f"sm_scale={sm_scale!r}: expected a positive float, e.g. 1/sqrt(192) "
                         f"for DeepSeek (the query head dim before absorption)")


_FLOAT32_MAX = 3.4028234663852886e38


def kv_scale_fields(name, value, device, describe=T.describe):
    """(float, device address) of one KV scale for the C struct: a Python float (finite, > 0 as
    a float32) gives (value, 0); a one-element float32 CUDA tensor gives (1.0, its address),
    which the kernel reads at run time, so that a captured CUDA graph follows later writes to
    it. Anything else: TypeError or ValueError naming `name`. `describe` turns a tensor into a
    _tensors.Tensor (the op's fake implementation passes its own: fake tensors have no data)."""
    if type(value) is float and 1.2e-38 < value < _FLOAT32_MAX:  # the common case, cheaply
        return value, 0
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        as_float32 = ctypes.c_float(float(value)).value  # what the C field will hold
        if not (math.isfinite(as_float32) and as_float32 > 0):
            raise ValueError(f"{name}={value!r}: expected a finite float > 0 (as a float32), or a "
                             f"one-element float32 CUDA tensor")
        return as_float32, 0
    if not (T._is_torch(value) or hasattr(value, "__cuda_array_interface__")):
        got = repr(value) if value is None or isinstance(value, (bool, str)) else \
            type(value).__name__
        raise TypeError(f"{name} must be a float or a one-element float32 CUDA tensor, got {got}")
    if T._is_torch(value) and value.device.type != "cuda":
        raise ValueError(f"{name} is a tensor on {value.device}: expected a CUDA tensor (the "
                         f"kernel reads it on the GPU; pass a float for a host value)")
    tensor = describe(name, value)
    if tensor.dtype != T.F32:
        raise TypeError(f"{tensor.name} has dtype {tensor.dtype}: expected float32 (one element)")
    if math.prod(tensor.shape) != 1:
        raise ValueError(f"{tensor.name} has shape {tensor.shape}: expected one element, shape () "
                         f"or (1,)")
    if device is not None and tensor.device is not None and tensor.device != device:
        raise ValueError(f"{tensor.name} is on cuda:{tensor.device}: expected cuda:{device}, the "
                         f"attention object's device")
    if tensor.ptr % 4:
        raise ValueError(f"{tensor.name} starts at 0x{tensor.ptr:x}, not 4-byte aligned")
    return 1.0, tensor.ptr


_UNSCALED = (1.0, 1.0, 0, 0)  # kv_scales' fields for the default scales


def kv_scales(shape, device, kv_scale_ckv, kv_scale_kpe, describe=T.describe,
              names=("kv_scale_ckv", "kv_scale_kpe")):
    """The C fields (kv_scale_ckv, kv_scale_kpe, kv_scale_ckv_device, kv_scale_kpe_device): each
    scale a float or a one-element float32 CUDA tensor (kv_scale_fields). Only an e4m3 KV cache
    scaled per tensor takes them: a 16-bit one, and one scaled per token (kv_scales "token128",
    whose ckv_scales replace them), take the defaults, 1.0 and no tensor (as run() in C++
    checks; here the message comes before the library is called, and at trace time from the
    op). `names`: what messages call the two scales (the op's own argument names)."""
    ckv, ckv_device = kv_scale_fields(names[0], kv_scale_ckv, device, describe)
    kpe, kpe_device = kv_scale_fields(names[1], kv_scale_kpe, device, describe)
    if shape.cache_dtype != T.E4M3 or shape.kv_scales != "tensor":
        for name, value, as_float in ((names[0], kv_scale_ckv, ckv),
                                      (names[1], kv_scale_kpe, kpe)):
            is_number = isinstance(value, numbers.Real)  # else a tensor (a fake one has no ptr)
            if not is_number or as_float != 1.0:
                given = repr(value) if is_number else "a tensor"
                if shape.cache_dtype != T.E4M3:
                    raise ValueError(f"{name}={given} scales an e4m3 KV cache, but this object's "
                                     f"KV cache is {shape.cache_dtype}, which takes no scale: "
                                     f"expected 1.0 (or an object created with "
                                     f"kv_dtype='float8_e4m3fn')")
                raise ValueError(f"{name}={given} is a per-tensor scale, but this object's KV "
                                 f"cache is scaled per token (kv_scales='token128'): its "
                                 f"ckv_scales replace the per-tensor scales (and kpe is not "
                                 f"quantized): expected 1.0")
    return ckv, kpe, ckv_device, kpe_device


def _torch_fingerprint(tensor):
    """Everything of a torch tensor that make_run_args checks, except its data pointer.
    Raises AttributeError for objects without torch's API."""
    return (type(tensor), tensor.is_cuda, tensor.get_device(), tensor.dtype, tensor.shape,
            tensor.stride())


def _all_torch(tensors):
    return all(tensor is None or T._is_torch(tensor) for tensor in tensors)


class BatchMlaAttention:
    """Batched MLA decode/prefill over a paged compressed KV cache (see include/mlajit/attention.h).

    attention = BatchMlaAttention(num_heads=128, dtype=torch.bfloat16, device=0)  # kernel="auto"
    attention.plan(qo_indptr, kv_indptr, kv_len)          # host ints, when the batch changes
    out = attention.run(q_nope, q_pe, ckv, kpe, kv_indices, sm_scale)  # on torch.cuda.current_stream()
    Not thread-safe: one object per thread (or a lock).

    DeepSeek-V3.2's FP8 cache (656-byte token rows: 512 e4m3 codes, 4 float32 scales, 64 bf16
    rope values): kv_dtype="float8_e4m3fn", kv_scales="token128", and run(..., ckv_scales=...)
    with views into the one uint8 buffer `cache` [pages, page_size, 656]:
        ckv = cache[..., :512].view(torch.float8_e4m3fn)
        ckv_scales = cache[..., 512:528].view(torch.float32)
        kpe = cache[..., 528:].view(torch.bfloat16)"""

    def __init__(self, num_heads=128, head_dim_ckv=512, head_dim_kpe=64, page_size=64,
                 dtype="bfloat16", causal=False, device=None, cluster_size=0, lse_base="2",
                 workspace_bytes=0, force_tier=0, force_two_launch=False,
                 validate_kv_indices=False, kv_dtype=None, kernel="auto",
                 compile_mode="default", batch_invariant=False, invariant_chunk_tokens=0,
                 kv_scales="tensor"):
        self.shape = ShapeSpec(num_heads, head_dim_ckv, head_dim_kpe, page_size, dtype, causal,
                               kv_dtype, kv_scales)
        if not isinstance(kernel, str):
            raise TypeError(f"kernel must be a kernel family name (str) or 'auto', got {kernel!r}")
        if device is None:
            device = _current_torch_device()
        elif not isinstance(device, int):
            device = getattr(device, "index", None)
            if device is None:
                raise ValueError("device must be a CUDA ordinal or a torch.device('cuda', n)")
        self.device = device  # None: the current context's device, decided by the library
        if str(lse_base) not in ("2", "e"):
            raise ValueError(f"lse_base={lse_base!r}: expected '2' or 'e'")
        if not isinstance(compile_mode, str) or compile_mode not in _capi.COMPILE_MODES:
            raise ValueError(f"compile_mode={compile_mode!r}: expected one of "
                             f"{', '.join(map(repr, _capi.COMPILE_MODES))}")
        options = _capi.new(_capi.Options)
        options.device = -1 if device is None else _int32("device", device)
        options.force_tier = _int32("force_tier", force_tier)
        options.cluster_size = _int32("cluster_size", cluster_size)
        options.force_two_launch = int(force_two_launch)
        options.workspace_bytes = _uint64("workspace_bytes", workspace_bytes)
        options.lse_base = _capi.LSE_NATURAL if str(lse_base) == "e" else _capi.LSE_BASE2
        options.validate_kv_indices = int(validate_kv_indices)
        options.kernel = kernel.encode()  # the library names the known families if unknown
        options.compile_mode = _capi.COMPILE_MODES[compile_mode]
        options.batch_invariant = int(bool(batch_invariant))
        options.invariant_chunk_tokens = _int32("invariant_chunk_tokens", invariant_chunk_tokens)
        self._lib = _capi.library()
        self._handle = ctypes.c_void_p()
        shape_c = self.shape.to_c()
        _capi.check(self._lib.mlajit_attention_create(ctypes.byref(shape_c), ctypes.byref(options),
                                                      ctypes.byref(self._handle)))
        self._num_tokens = None
        # run()'s hot path: one bound function on plain addresses, one reused argument struct,
        # and the fingerprint of the torch tensors that last passed every check (see run()).
        self._run_c = _capi.bind(self._lib, "mlajit_attention_run", ctypes.c_int,
                                 [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p])
        self._handle_address = self._handle.value
        self._args = _capi.new(_capi.RunArgs)
        self._args_address = ctypes.addressof(self._args)
        self._checked = None  # (fingerprints, the RunArgs fields that follow from them)
        self._stream_getter = None
        # torch.ops.mlajit.run(..., handle) names this object by this int (see torch_ops.py).
        self.op_handle = _op_handles.register(self)

    def close(self):
        """Releases the C object; its op_handle is refused from now on."""
        self._release()
        if getattr(self, "op_handle", None) is not None:
            _op_handles.unregister(self.op_handle)

    def __del__(self):
        # Only the C object: the registry's weak reference died with this object (and at
        # interpreter exit the _op_handles module may already be torn down).
        self._release()

    def _release(self):
        self._handle_address = None  # a run() after close() passes NULL: the library refuses it
        if getattr(self, "_handle", None):
            self._lib.mlajit_attention_destroy(self._handle)
            self._handle = None

    def _stream(self, stream):
        if stream is not None:
            return getattr(stream, "cuda_stream", stream)
        getter = self._stream_getter
        if getter is None:
            torch = _streams.loaded_torch()
            if torch is None:
                return None  # looked up again next call: the caller may import torch later
            getter = self._stream_getter = _streams.current_stream_getter(torch, self.device)
        return getter()

    def plan(self, qo_indptr, kv_indptr, kv_len, kv_indices=None, num_pages=0, stream=None):
        """Host arrays (lists, numpy, CPU tensors): qo_indptr/kv_indptr [batch+1], kv_len [batch].
        kv_indices (host) and num_pages are needed only with validate_kv_indices."""
        kv_len_c, batch_size = _int32_array("kv_len", kv_len)
        qo_c, _ = _int32_array("qo_indptr", qo_indptr, batch_size + 1)
        kv_c, _ = _int32_array("kv_indptr", kv_indptr, batch_size + 1)
        batch = _capi.new(_capi.Batch)
        batch.qo_indptr, batch.kv_indptr, batch.kv_len, batch.batch_size = qo_c, kv_c, kv_len_c, batch_size
        if kv_indices is not None:
            batch.kv_indices = _int32_array("kv_indices", kv_indices)[0]
            batch.num_pages = _int64("num_pages", num_pages)
        _capi.check(self._lib.mlajit_attention_plan(self._handle, ctypes.byref(batch),
                                                    self._stream(stream)))
        self._num_tokens = qo_c[batch_size] if batch_size else 0

    def run(self, q_nope, q_pe, ckv, kpe, kv_indices, sm_scale, out=None, lse=None, stream=None,
            *, kv_scale_ckv=1.0, kv_scale_kpe=1.0, ckv_scales=None):
        """Writes out (allocated like q_nope when None) and lse (optional) and returns out.

        An e4m3 KV cache (kv_dtype='float8_e4m3fn') is read as ckv * kv_scale_ckv and
        kpe * kv_scale_kpe; each scale is a float or a one-element float32 CUDA tensor, which
        the kernel reads at run time (a captured CUDA graph then follows updates to it). A
        16-bit cache takes neither.

        An object created with kv_scales='token128' (DeepSeek-V3.2) instead takes ckv_scales,
        required there: a float32 CUDA tensor [pages, page_size, head_dim_ckv // 128] (pages as
        ckv's), last dimension contiguous, other strides multiples of 4, 16-byte aligned; value
        c of a token's ckv is read as its code * ckv_scales[page][token][c // 128], and kpe is of
        the object's dtype, unscaled. kv_scale_ckv / kv_scale_kpe stay 1.0 then. ckv_scales is
        None (the default) for every other object."""
        if out is None:
            if not T._is_torch(q_nope):
                raise TypeError("out is required when q_nope is not a torch tensor")
            out = q_nope.new_empty((q_nope.shape[0], self.shape.num_heads, self.shape.head_dim_ckv))
        # The checks depend only on each tensor's type, device, dtype, shape and strides, and on
        # its data pointer's alignment. When every tensor is a torch tensor whose fingerprint is
        # the one that passed all checks last time, only the pointers and sm_scale are new:
        # check those and rewrite the whole argument struct in one pack_into.
        try:
            fingerprints = (_torch_fingerprint(q_nope), _torch_fingerprint(q_pe),
                            _torch_fingerprint(ckv), _torch_fingerprint(kpe),
                            _torch_fingerprint(kv_indices), _torch_fingerprint(out),
                            None if lse is None else _torch_fingerprint(lse),
                            None if ckv_scales is None else _torch_fingerprint(ckv_scales))
        except AttributeError:
            fingerprints = None  # not torch tensors: the full checks every call
        checked = self._checked
        if checked is not None and fingerprints == checked[0]:
            qn, qp, c, k, o = (q_nope.data_ptr(), q_pe.data_ptr(), ckv.data_ptr(), kpe.data_ptr(),
                               out.data_ptr())
            cs = 0 if ckv_scales is None else ckv_scales.data_ptr()
            if not (qn | qp | c | k | o | cs) & 15:
                _require_sm_scale(sm_scale)
                # (types first: comparing a tensor with 1.0 would read it back from the GPU)
                if (kv_scale_ckv.__class__ is float is kv_scale_kpe.__class__ and
                        kv_scale_ckv == 1.0 and kv_scale_kpe == 1.0):
                    scales = _UNSCALED  # the 16-bit caches' only case: skip the calls
                else:
                    scales = kv_scales(self.shape, self.device, kv_scale_ckv, kv_scale_kpe)
                s = checked[1]
                _capi.RUN_ARGS_PACK.pack_into(
                    self._args, 0, s[0], qn, s[1], s[2], qp, s[3], s[4], c, s[5], s[6], k, s[7], s[8],
                    kv_indices.data_ptr(), o, s[9], s[10], 0 if lse is None else lse.data_ptr(),
                    s[11], sm_scale, 0, *scales, cs, s[12], s[13])
                status = self._run_c(self._handle_address, self._args_address, self._stream(stream))
                if status:
                    _capi.check(status)
                return out
            # a misaligned pointer: the full checks below say which
        args = make_run_args(self.shape, self.device, q_nope, q_pe, ckv, kpe, kv_indices, out,
                             sm_scale, lse, kv_scale_ckv, kv_scale_kpe, ckv_scales)
        if fingerprints is not None and _all_torch((q_nope, q_pe, ckv, kpe, kv_indices, out, lse,
                                                    ckv_scales)):
            self._checked = (fingerprints, (
                args.struct_size, args.q_nope_stride_token, args.q_nope_stride_head,
                args.q_pe_stride_token, args.q_pe_stride_head, args.ckv_stride_page,
                args.ckv_stride_token, args.kpe_stride_page, args.kpe_stride_token,
                args.out_stride_token, args.out_stride_head, args.num_tokens,
                args.ckv_scales_stride_page, args.ckv_scales_stride_token))
        status = self._run_c(self._handle_address, ctypes.addressof(args), self._stream(stream))
        if status:
            _capi.check(status)
        return out

    def plan_info(self):
        info = _capi.new(_capi.PlanInfo)
        _capi.check(self._lib.mlajit_attention_plan_info(self._handle, ctypes.byref(info)))
        return {name: getattr(info, name) for name, _ in _capi.PlanInfo._fields_[1:]}

    def spec_text(self):
        buffer = ctypes.create_string_buffer(512)
        _capi.check(self._lib.mlajit_attention_spec_text(self._handle, buffer, 512, None))
        return buffer.value.decode()


def _current_torch_device():
    torch = _streams.loaded_torch()
    if torch is not None and torch.cuda.is_available():
        return torch.cuda.current_device()
    return None
