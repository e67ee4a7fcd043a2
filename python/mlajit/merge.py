"""merge_states for Python: partial attentions of the same queries over disjoint KV, each an
output [tokens, heads, dim] (bfloat16 or float16) and its LSE [tokens, heads] (float32), combined
on the GPU into the attention over the union (see include/mlajit/merge_states.h):

    out, lse = mlajit.merge_states(out_a, lse_a, out_b, lse_b)        # two parts
    out, lse = mlajit.merge_states_n([out_a, out_b, out_c], [lse_a, lse_b, lse_c])

A part with lse = -inf (it saw no KV) contributes nothing; rows where every part is empty get
out 0 and lse -inf, as run() gives kv_len 0. lse_base ("2" or "e") is that of every LSE, in and
out: the base the parts' BatchMlaAttention objects were created with."""
import ctypes

from . import _capi
from . import _streams
from . import _tensors as T

_C_DTYPES = {T.F16: _capi.FLOAT16, T.BF16: _capi.BFLOAT16}


def _lse_base(lse_base):
    if str(lse_base) not in ("2", "e"):
        raise ValueError(f"lse_base={lse_base!r}: expected '2' or 'e'")
    return _capi.LSE_NATURAL if str(lse_base) == "e" else _capi.LSE_BASE2


def _require_dense_lse(tensor, tokens, heads, device):
    T.require(tensor, T.F32, (tokens, heads), device)
    if tokens > 1 and tensor.strides[0] != heads:
        raise ValueError(f"{tensor.name} must be dense [num_tokens, num_heads]: strides "
                         f"{tensor.strides}")


def check_merge_tensors(outs, lses, out, lse):
    """The checks of merge_states on described tensors (_tensors.Tensor; lse may be None); the
    torch op's fake implementation runs them too. Returns (tokens, heads, dim, dtype, device)."""
    if len(outs) != len(lses):
        raise ValueError(f"{len(outs)} outputs and {len(lses)} LSEs: every part needs both")
    if not 1 <= len(outs) <= _capi.MAX_MERGE_STATE_PARTS:
        raise ValueError(f"{len(outs)} parts: expected 1 to {_capi.MAX_MERGE_STATE_PARTS} (merge "
                         f"more in rounds: a merged state is a part)")
    first = outs[0]
    if first.dtype not in _C_DTYPES:
        raise TypeError(f"{first.name} has dtype {first.dtype}: expected bfloat16 or float16")
    if len(first.shape) != 3:
        raise ValueError(f"{first.name} has shape {first.shape}: expected (tokens, heads, dim)")
    tokens, heads, dim = first.shape
    if dim % 8 or not 8 <= dim <= 65536:
        raise ValueError(f"{first.name} has dim {dim}: expected a multiple of 8 (16 bytes) in "
                         f"8..65536")
    device = next((t.device for t in (*outs, *lses, out) if t.device is not None), None)
    for tensor in (*outs, out):
        T.require(tensor, first.dtype, (tokens, heads, dim), device)
        T.require_rows(tensor, "token, head")
    for tensor in lses + ([lse] if lse is not None else []):
        _require_dense_lse(tensor, tokens, heads, device)
    return tokens, heads, dim, first.dtype, device


def make_merge_args(outs, lses, out, lse=None, lse_base="2"):
    """Checks the tensors and returns the C arguments (and the parts array they point to, to
    keep alive). No GPU needed."""
    for name, value in (("outs", outs), ("lses", lses)):
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{name} must be a list of tensors, got {type(value).__name__}")
    base = _lse_base(lse_base)
    o = [T.describe(f"outs[{i}]", value) for i, value in enumerate(outs)]
    l = [T.describe(f"lses[{i}]", value) for i, value in enumerate(lses)]
    merged = T.describe("out", out)
    merged_lse = None if lse is None else T.describe("lse", lse)
    tokens, heads, dim, dtype, device = check_merge_tensors(o, l, merged, merged_lse)
    parts = (_capi.AttentionState * len(o))()
    for part, part_out, part_lse in zip(parts, o, l):
        part.out, (part.out_stride_token, part.out_stride_head) = part_out.ptr, part_out.strides[:2]
        part.lse = part_lse.ptr
    args = _capi.new(_capi.MergeStatesArgs)
    args.parts, args.num_parts = parts, len(o)
    args.out, (args.out_stride_token, args.out_stride_head) = merged.ptr, merged.strides[:2]
    args.lse = 0 if merged_lse is None else merged_lse.ptr
    args.num_tokens, args.num_heads, args.head_dim = tokens, heads, dim
    args.dtype, args.lse_base = _C_DTYPES[dtype], base
    args.device = -1 if device is None else device
    return args, parts


def _stream(stream, device):
    if stream is not None:
        return getattr(stream, "cuda_stream", stream)
    torch = _streams.loaded_torch()
    if torch is None:
        return None  # the legacy default stream
    return _streams.current_stream_getter(torch, device)()


def merge_into(outs, lses, out, lse=None, lse_base="2", stream=None):
    """Writes the merge of the parts into `out` (and `lse` unless None): no allocation."""
    args, parts = make_merge_args(outs, lses, out, lse, lse_base)
    device = None if args.device < 0 else args.device
    _capi.check(_capi.library().mlajit_merge_states(ctypes.byref(args), _stream(stream, device)))
    del parts  # kept alive until the call returned


def merge_states_n(outs, lses, out=None, lse=None, lse_base="2", stream=None):
    """Merges n partial states; returns (out, lse). `out` and `lse` are allocated like the first
    part's when None (torch tensors); they may be a part's own tensors (an in-place merge)."""
    if out is None:
        if not outs or not T._is_torch(outs[0]):
            raise TypeError("out is required when the parts are not torch tensors")
        out = outs[0].new_empty(tuple(outs[0].shape))
    if lse is None and lses and T._is_torch(lses[0]):
        lse = lses[0].new_empty(tuple(lses[0].shape))
    merge_into(list(outs), list(lses), out, lse, lse_base, stream)
    return out, lse


def merge_states(out_a, lse_a, out_b, lse_b, out=None, lse=None, lse_base="2", stream=None):
    """Merges two partial states; returns (out, lse). See merge_states_n."""
    return merge_states_n([out_a, out_b], [lse_a, lse_b], out, lse, lse_base, stream)
