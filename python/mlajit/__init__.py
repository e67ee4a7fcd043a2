"""mlajit for Python: batched MLA attention on PyTorch tensors through libmlajit's C ABI.

The library is found through $MLAJIT_LIBRARY, next to this package (where `pip install .` puts
it), or on the loader path. Where torch can be imported, the custom op torch.ops.mlajit.run is
registered too (see torch_ops.py); mlajit itself does not need torch.
"""
import importlib.util
import warnings

from ._capi import MlajitError
from .attention import BatchMlaAttention, ShapeSpec, make_run_args
from .merge import make_merge_args, merge_states, merge_states_n
from .runtime import (cache_stats, devices, driver_available, kernel_families, precompile,
                      tile_for_arch, tile_for_device, version)

__all__ = ["BatchMlaAttention", "MlajitError", "ShapeSpec", "make_run_args", "make_merge_args",
           "merge_states", "merge_states_n", "cache_stats",
           "devices", "driver_available", "kernel_families", "precompile", "tile_for_arch",
           "tile_for_device", "torch_op_available", "version"]


def _register_torch_op():
    """Imports torch_ops (which registers the op) where torch is installed: there the op is
    wanted, and importing torch is paid for once. A torch that is installed but fails to import
    or is too old leaves the op unregistered and says why; the rest of mlajit works regardless."""
    if importlib.util.find_spec("torch") is None:
        return None, "torch is not installed"
    try:
        from . import torch_ops
    except Exception as error:  # noqa: BLE001 - whatever torch raised: mlajit works without it
        reason = f"{type(error).__name__}: {error}"
        warnings.warn(f"mlajit: torch is installed, but torch.ops.mlajit.run is not registered "
                      f"({reason}); BatchMlaAttention.run works without it", RuntimeWarning,
                      stacklevel=2)
        return None, reason
    return torch_ops, ""


torch_ops, _torch_op_missing = _register_torch_op()


def torch_op_available():
    """(True, "") when torch.ops.mlajit.run is registered, else (False, why)."""
    return torch_ops is not None, _torch_op_missing
