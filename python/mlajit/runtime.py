"""Process-wide queries: version, devices, kernel families, tile configs, the kernel cache,
precompile."""
import ctypes

from . import _capi
from .attention import ShapeSpec


def version():
    """The loaded library's version string."""
    return _capi.library().mlajit_version().decode()


def driver_available():
    """(True, "") or (False, why)."""
    lib = _capi.library()
    ok = bool(lib.mlajit_driver_available())
    return ok, "" if ok else lib.mlajit_last_error().decode(errors="replace")


def devices():
    lib = _capi.library()
    count = ctypes.c_int()
    _capi.check(lib.mlajit_device_count(ctypes.byref(count)))
    result = []
    for ordinal in range(count.value):
        info = _capi.new(_capi.DeviceInfo)
        _capi.check(lib.mlajit_device_info_get(ordinal, ctypes.byref(info)))
        result.append({"ordinal": info.ordinal, "name": info.name.decode(), "arch": info.arch.decode(),
                       "cc": (info.cc_major, info.cc_minor), "sm_count": info.sm_count,
                       "smem_per_sm": info.smem_per_sm, "smem_per_block_optin": info.smem_per_block_optin,
                       "cooperative_launch": bool(info.cooperative_launch)})
    return result


def kernel_families():
    """The kernel families, in the order kernel="auto" prefers them; no GPU needed."""
    lib = _capi.library()
    count = ctypes.c_int()
    _capi.check(lib.mlajit_kernel_family_count(ctypes.byref(count)))
    families = []
    for index in range(count.value):
        info = _capi.new(_capi.KernelFamilyInfo)
        _capi.check(lib.mlajit_kernel_family_get(index, ctypes.byref(info)))
        families.append({"name": info.name.decode(), "summary": info.summary.decode(),
                         "head_dims": [d for d in info.head_dims.decode().split(",") if d],
                         "archs": [a for a in info.archs.decode().split(",") if a]})
    return families


def _tile_dict(info):
    return {"family": info.family.decode(), "num_stages": info.num_stages, "kv_tile": info.kv_tile,
            "qk_shard": bool(info.qk_shard), "q_tile": info.q_tile, "tier": info.tier,
            "shared_bytes": info.shared_bytes, "spec_text": info.spec_text.decode()}


def tile_for_arch(arch, **shape):
    """The tile config a shape (ShapeSpec keywords) gets on an arch's profile; no GPU needed."""
    info = _capi.new(_capi.TileInfo)
    shape_c = ShapeSpec(**shape).to_c()
    _capi.check(_capi.library().mlajit_tile_for_arch(arch.encode(), ctypes.byref(shape_c),
                                                     ctypes.byref(info)))
    return _tile_dict(info)


def tile_for_device(ordinal, **shape):
    info = _capi.new(_capi.TileInfo)
    shape_c = ShapeSpec(**shape).to_c()
    _capi.check(_capi.library().mlajit_tile_for_device(ordinal, ctypes.byref(shape_c),
                                                       ctypes.byref(info)))
    return _tile_dict(info)


def cache_stats():
    stats = _capi.new(_capi.CacheStats)
    _capi.check(_capi.library().mlajit_cache_stats_get(ctypes.byref(stats)))
    shipped = stats.read_only_dirs.decode()
    return {name: getattr(stats, name) for name, _ in _capi.CacheStats._fields_[1:]} | {
        "user_dir": stats.user_dir.decode(),
        "read_only_dirs": shipped.split(":") if shipped else []}


def precompile(spec_text):
    """Compiles a kernel spec text into the cache (needs NVRTC, no GPU)."""
    result = _capi.new(_capi.PrecompileResult)
    _capi.check(_capi.library().mlajit_precompile(spec_text.encode(), ctypes.byref(result)))
    return {"key": result.key.decode(), "from_cache": bool(result.from_cache),
            "bytes": result.bytes, "compile_seconds": result.compile_seconds}
