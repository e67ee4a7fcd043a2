"""torch.ops.mlajit.run: BatchMlaAttention.run as a PyTorch custom op (torch >= 2.4), so that
torch.compile(fullgraph=True) traces a model step that calls it and CUDA graphs capture it.

    attention = mlajit.BatchMlaAttention(num_heads=128, cluster_size=1, workspace_bytes=...)
    handle = attention.op_handle            # an int: custom ops cannot take Python objects

    @torch.compile(fullgraph=True)
    def step(q_nope, q_pe, ckv, kpe, kv_indices):
        out = q_nope.new_empty(q_nope.shape)
        torch.ops.mlajit.run(q_nope, q_pe, ckv, kpe, kv_indices, out, None, sm_scale, handle)
        return out

    attention.plan(qo_indptr, kv_indptr, kv_len)   # a host call, outside the compiled step
    out = step(q_nope, q_pe, ckv, kpe, kv_indices)

The op writes `out` and `lse` (optional) and returns nothing; its schema declares both
mutations (Tensor(a5!) out, Tensor(a6!)? lse), so the compiler orders it against their other
uses. It runs on torch's current stream, like BatchMlaAttention.run. The fake implementation
checks shapes, dtypes and devices against the object the handle names, at trace time, and
produces nothing; the data pointer checks wait for the real call.

An e4m3 KV cache's scales (BatchMlaAttention.run's kv_scale_ckv / kv_scale_kpe, each a float or
a tensor) come in two forms, as a schema has no float-or-tensor type: the floats kv_scale_ckv /
kv_scale_kpe (default 1.0; the compiler bakes a float in as a constant, so a new value means a
recompile and a new graph), or the one-element float32 CUDA tensors kv_scale_ckv_tensor /
kv_scale_kpe_tensor (default None), which the kernel reads at run time: the value can change
between replays of a captured graph. One form per scale: a tensor needs its float left at 1.0.

An object created with kv_scales='token128' (DeepSeek-V3.2's cache: e4m3 ckv with one float32
scale per 128 values of each token, kpe in the queries' dtype) takes those scales as the last
argument, ckv_scales (Optional[Tensor], default None: every other object leaves it out), a
float32 CUDA tensor [pages, page_size, head_dim_ckv // 128] that the kernel reads as it reads
ckv, often a view into the same 656-byte-row cache buffer; the kv_scale_* arguments then stay
at their defaults. The fake implementation checks it like the other tensors.

torch.ops.mlajit.merge_states(outs, lses, out, lse, natural_lse) is merge_states_n as an op: it
writes `out` (and `lse` when given) from the parts' outputs and LSEs, on torch's current stream.

Imported by mlajit's __init__ when torch can be imported; importing it without torch is an
ImportError."""
from typing import List, Optional

import torch

from . import _op_handles
from . import merge as _merge
from . import _tensors as T
from .attention import check_run_tensors, kv_scale_fields, kv_scales, _require_sm_scale

if not hasattr(torch.library, "custom_op"):
    raise ImportError(f"torch {torch.__version__} has no torch.library.custom_op: the mlajit op "
                      f"needs torch >= 2.4")

OP_NAME = "mlajit::run"


def _one_scale(name, value, tensor):
    """The op's two forms of a scale as BatchMlaAttention.run takes it: the tensor, else the
    float."""
    if tensor is None:
        return value
    if isinstance(value, (int, float)) and value != 1.0:
        raise ValueError(f"{name}={value!r} and {name}_tensor are both given: expected one of "
                         f"them (leave {name} at 1.0 when the scale is a tensor)")
    return tensor


def _scale_names(kv_scale_ckv_tensor, kv_scale_kpe_tensor):
    """What messages call the scales: the op's argument that holds each."""
    return ("kv_scale_ckv" if kv_scale_ckv_tensor is None else "kv_scale_ckv_tensor",
            "kv_scale_kpe" if kv_scale_kpe_tensor is None else "kv_scale_kpe_tensor")


@torch.library.custom_op(OP_NAME, mutates_args=("out", "lse"))
def run(q_nope: torch.Tensor, q_pe: torch.Tensor, ckv: torch.Tensor, kpe: torch.Tensor,
        kv_indices: torch.Tensor, out: torch.Tensor, lse: Optional[torch.Tensor],
        sm_scale: float, handle: int, kv_scale_ckv: float = 1.0, kv_scale_kpe: float = 1.0,
        kv_scale_ckv_tensor: Optional[torch.Tensor] = None,
        kv_scale_kpe_tensor: Optional[torch.Tensor] = None,
        ckv_scales: Optional[torch.Tensor] = None) -> None:
    """BatchMlaAttention.run of the object whose op_handle is `handle`, writing out (and lse
    when given) on torch's current stream. Plan the object first, outside the compiled code.
    An e4m3 cache's per-tensor scales: a float, or a one-element float32 CUDA tensor read at
    run time. ckv_scales: the per-token scales of an object created with kv_scales='token128'
    (required there, None otherwise), as BatchMlaAttention.run takes them."""
    attention = _op_handles.lookup(handle)
    ckv_scale = _one_scale("kv_scale_ckv", kv_scale_ckv, kv_scale_ckv_tensor)
    kpe_scale = _one_scale("kv_scale_kpe", kv_scale_kpe, kv_scale_kpe_tensor)
    if kv_scale_ckv_tensor is not None or kv_scale_kpe_tensor is not None:
        # checked here too, so that a message names the op's argument, not run()'s
        kv_scales(attention.shape, attention.device, ckv_scale, kpe_scale,
                  names=_scale_names(kv_scale_ckv_tensor, kv_scale_kpe_tensor))
    attention.run(q_nope, q_pe, ckv, kpe, kv_indices, sm_scale, out=out, lse=lse,
                  kv_scale_ckv=ckv_scale, kv_scale_kpe=kpe_scale, ckv_scales=ckv_scales)


def _describe_fake(name, tensor):
    """A FakeTensor as _tensors.Tensor: no data pointer (0 passes the alignment check; the
    real call checks the real pointer)."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.device.type != "cuda":
        raise ValueError(f"{name} is on {tensor.device}: expected a CUDA tensor")
    return T.Tensor(name, 0, str(tensor.dtype).replace("torch.", ""), tuple(tensor.shape),
                    tuple(tensor.stride()), tensor.device.index, True)


@run.register_fake
def _run_fake(q_nope, q_pe, ckv, kpe, kv_indices, out, lse, sm_scale, handle, kv_scale_ckv=1.0,
              kv_scale_kpe=1.0, kv_scale_ckv_tensor=None, kv_scale_kpe_tensor=None,
              ckv_scales=None):
    described = [_describe_fake(name, tensor) for name, tensor in (
        ("q_nope", q_nope), ("q_pe", q_pe), ("ckv", ckv), ("kpe", kpe),
        ("kv_indices", kv_indices), ("out", out))]
    described.append(None if lse is None else _describe_fake("lse", lse))
    described.append(None if ckv_scales is None else _describe_fake("ckv_scales", ckv_scales))
    scales = (_one_scale("kv_scale_ckv", kv_scale_ckv, kv_scale_ckv_tensor),
              _one_scale("kv_scale_kpe", kv_scale_kpe, kv_scale_kpe_tensor))
    names = _scale_names(kv_scale_ckv_tensor, kv_scale_kpe_tensor)
    # A traced int (SymInt: the compiler saw several handles) or float cannot be looked up or
    # compared here; the real call checks them.
    known = all(isinstance(value, (int, float, torch.Tensor)) for value in scales)
    if isinstance(handle, int):
        attention = _op_handles.lookup(handle)
        check_run_tensors(attention.shape, attention.device, *described)
        if known:
            kv_scales(attention.shape, attention.device, *scales, _describe_fake, names)
    elif known:
        for name, value in zip(names, scales):
            kv_scale_fields(name, value, None, _describe_fake)
    if isinstance(sm_scale, (int, float)):
        _require_sm_scale(sm_scale)


MERGE_OP_NAME = "mlajit::merge_states"


@torch.library.custom_op(MERGE_OP_NAME, mutates_args=("out", "lse"))
def merge_states(outs: List[torch.Tensor], lses: List[torch.Tensor], out: torch.Tensor,
                 lse: Optional[torch.Tensor], natural_lse: bool) -> None:
    """mlajit.merge_states_n into `out` (and `lse` when given); LSEs in base e when
    natural_lse, else base 2."""
    _merge.merge_into(list(outs), list(lses), out, lse, "e" if natural_lse else "2")


@merge_states.register_fake
def _merge_states_fake(outs, lses, out, lse, natural_lse):
    _merge.check_merge_tensors(
        [_describe_fake(f"outs[{i}]", t) for i, t in enumerate(outs)],
        [_describe_fake(f"lses[{i}]", t) for i, t in enumerate(lses)],
        _describe_fake("out", out), None if lse is None else _describe_fake("lse", lse))
