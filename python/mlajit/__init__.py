"""mlajit for Python: batched MLA attention on PyTorch tensors through libmlajit's C ABI.

The library is found through $MLAJIT_LIBRARY, next to this package, or on the loader path.
"""
from ._capi import MlajitError
from .attention import BatchMlaAttention, ShapeSpec, make_run_args
from .runtime import (cache_stats, devices, driver_available, kernel_families, precompile,
                      tile_for_arch, tile_for_device, version)

__all__ = ["BatchMlaAttention", "MlajitError", "ShapeSpec", "make_run_args", "cache_stats",
           "devices", "driver_available", "kernel_families", "precompile", "tile_for_arch",
           "tile_for_device", "version"]
