"""Device tensors as mlajit sees them: PyTorch tensors, or any object with
``__cuda_array_interface__`` (CuPy, Numba, ...). Checks raise TypeError (wrong kind or dtype)
or ValueError (device, shape, strides, alignment) naming the argument."""
from collections import namedtuple

# dtype names used in messages and comparisons (torch's names)
BF16, F16, E4M3, F32, I32 = "bfloat16", "float16", "float8_e4m3fn", "float32", "int32"
_ITEMSIZE = {BF16: 2, F16: 2, E4M3: 1, F32: 4, I32: 4}
# __cuda_array_interface__ typestr -> dtype (it has no code for bfloat16: pass torch tensors)
_TYPESTR = {"<f2": F16, "<f4": F32, "<i4": I32}

Tensor = namedtuple("Tensor", "name ptr dtype shape strides device is_torch")
"""ptr: device address; strides: in elements; device: CUDA ordinal or None (unknown)."""


def _is_torch(value):
    return type(value).__module__.startswith("torch") and hasattr(value, "data_ptr")


def _torch_dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def describe(name, value):
    """The Tensor view of `value`, or TypeError/ValueError naming `name`."""
    if _is_torch(value):
        if value.device.type != "cuda":
            raise ValueError(f"{name} is on {value.device}: expected a CUDA tensor")
        return Tensor(name, value.data_ptr(), _torch_dtype_name(value.dtype), tuple(value.shape),
                      tuple(value.stride()), value.device.index, True)
    interface = getattr(value, "__cuda_array_interface__", None)
    if interface is None:
        raise TypeError(f"{name} must be a CUDA tensor (torch.Tensor or an object with "
                        f"__cuda_array_interface__), got {type(value).__name__}")
    typestr = interface.get("typestr")
    if typestr not in _TYPESTR:
        raise TypeError(f"{name} has typestr {typestr!r}: expected one of {sorted(_TYPESTR)} "
                        f"(bfloat16 and float8_e4m3fn have no typestr: pass a torch tensor)")
    dtype = _TYPESTR[typestr]
    shape = tuple(int(n) for n in interface["shape"])
    itemsize = _ITEMSIZE[dtype]
    if interface.get("strides") is None:  # C-contiguous
        strides, step = [], 1
        for extent in reversed(shape):
            strides.insert(0, step)
            step *= max(extent, 1)
        strides = tuple(strides)
    else:
        byte_strides = tuple(int(s) for s in interface["strides"])
        if any(s % itemsize for s in byte_strides):
            raise ValueError(f"{name} has byte strides {byte_strides} that are not multiples of "
                             f"its element size {itemsize}")
        strides = tuple(s // itemsize for s in byte_strides)
    return Tensor(name, int(interface["data"][0]), dtype, shape, strides, None, False)


def require(tensor, dtype, shape, device):
    """Checks dtype, shape (None entries match anything), last-dim contiguity and device."""
    if tensor.dtype != dtype:
        raise TypeError(f"{tensor.name} has dtype {tensor.dtype}: expected {dtype}")
    if len(tensor.shape) != len(shape) or any(
            want is not None and have != want for have, want in zip(tensor.shape, shape)):
        expected = "(" + ", ".join("*" if n is None else str(n) for n in shape) + ")"
        raise ValueError(f"{tensor.name} has shape {tensor.shape}: expected {expected}")
    if tensor.shape and tensor.shape[-1] > 1 and tensor.strides[-1] != 1:
        raise ValueError(f"{tensor.name} must be contiguous in its last dimension: its stride "
                         f"there is {tensor.strides[-1]}, expected 1")
    if device is not None and tensor.device is not None and tensor.device != device:
        raise ValueError(f"{tensor.name} is on cuda:{tensor.device}: expected cuda:{device}, the "
                         f"attention object's device")


def require_rows(tensor, what):
    """Row strides the kernels can use: multiples of 16 bytes, 16-byte aligned start."""
    per_16_bytes = 16 // _ITEMSIZE[tensor.dtype]
    for axis, stride in enumerate(tensor.strides[:-1]):
        if stride % per_16_bytes != 0:
            raise ValueError(f"{tensor.name} has stride {stride} in dimension {axis} ({what}): "
                             f"expected a multiple of {per_16_bytes} elements (16 bytes)")
    if tensor.ptr % 16 != 0:
        raise ValueError(f"{tensor.name} starts at 0x{tensor.ptr:x}, not 16-byte aligned")
