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

torch.ops.mlajit.merge_states(outs, lses, out, lse, natural_lse) is merge_states_n as an op: it
writes `out` (and `lse` when given) from the parts' outputs and LSEs, on torch's current stream.

Imported by mlajit's __init__ when torch can be imported; importing it without torch is an
ImportError."""
from typing import List, Optional

import torch

from . import _op_handles
from . import merge as _merge
from . import _tensors as T
from .attention import check_run_tensors, _require_sm_scale

if not hasattr(torch.library, "custom_op"):
    raise ImportError(f"torch {torch.__version__} has no torch.library.custom_op: the mlajit op "
                      f"needs torch >= 2.4")

OP_NAME = "mlajit::run"


@torch.library.custom_op(OP_NAME, mutates_args=("out", "lse"))
def run(q_nope: torch.Tensor, q_pe: torch.Tensor, ckv: torch.Tensor, kpe: torch.Tensor,
        kv_indices: torch.Tensor, out: torch.Tensor, lse: Optional[torch.Tensor],
        sm_scale: float, handle: int) -> None:
    """BatchMlaAttention.run of the object whose op_handle is `handle`, writing out (and lse
    when given) on torch's current stream. Plan the object first, outside the compiled code."""
    _op_handles.lookup(handle).run(q_nope, q_pe, ckv, kpe, kv_indices, sm_scale, out=out,
                                   lse=lse)


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
def _run_fake(q_nope, q_pe, ckv, kpe, kv_indices, out, lse, sm_scale, handle):
    described = [_describe_fake(name, tensor) for name, tensor in (
        ("q_nope", q_nope), ("q_pe", q_pe), ("ckv", ckv), ("kpe", kpe),
        ("kv_indices", kv_indices), ("out", out))]
    described.append(None if lse is None else _describe_fake("lse", lse))
    # A traced int (SymInt: the compiler saw several handles) or float cannot be looked up or
    # compared here; the real call checks them.
    if isinstance(handle, int):
        attention = _op_handles.lookup(handle)
        check_run_tensors(attention.shape, attention.device, *described)
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
