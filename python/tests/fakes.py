"""Stand-ins for torch tensors, __cuda_array_interface__ arrays and libmlajit, so the binding's
host-side work can be tested and timed without torch, a GPU or a driver."""
import ctypes

from mlajit import _capi


class FakeDtype:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"torch.{self.name}"

    __str__ = __repr__


class FakeDevice:
    def __init__(self, kind, index):
        self.type, self.index = kind, index

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"


BF16, I32, F32 = FakeDtype("bfloat16"), FakeDtype("int32"), FakeDtype("float32")


class FakeTorchTensor:
    """torch.Tensor's attribute surface; `device` and `shape` build new objects per access."""

    def __init__(self, shape, dtype=BF16, ptr=0x7f0000000000, strides=None, device=0):
        self._shape, self.dtype, self._ptr, self._device = tuple(shape), dtype, ptr, device
        if strides is None:
            strides, step = [], 1
            for extent in reversed(self._shape):
                strides.insert(0, step)
                step *= max(extent, 1)
        self._strides = tuple(strides)
        self.is_cuda = device >= 0

    @property
    def shape(self):
        return tuple(self._shape)

    @property
    def device(self):
        return FakeDevice("cuda" if self._device >= 0 else "cpu", self._device if self._device >= 0 else None)

    def data_ptr(self):
        return self._ptr

    def stride(self):
        return tuple(self._strides)

    def get_device(self):
        return self._device

    def size(self, dim=None):
        return self._shape if dim is None else self._shape[dim]


FakeTorchTensor.__module__ = "torch"  # what the binding's torch test looks at


class FakeDeviceArray:
    def __init__(self, shape, typestr="<f2", ptr=0x7f0000000000):
        self._interface = {"shape": tuple(shape), "typestr": typestr, "data": (ptr, False),
                           "strides": None, "version": 3}

    @property
    def __cuda_array_interface__(self):
        return dict(self._interface)  # CuPy builds a new dict per access


class FakeLibrary:
    """The prototypes the binding uses; run is libc memcmp (returns 0 for a zero length)."""

    def __init__(self):
        self._libc = ctypes.CDLL(None)
        self.mlajit_attention_create = lambda shape, options, out: 0
        self.mlajit_attention_destroy = lambda handle: None
        self.mlajit_attention_plan = lambda handle, batch, stream: 0
        self.mlajit_last_error = lambda: b"fake"
        self.mlajit_attention_run = self["mlajit_attention_run"]  # as library() declares it:
        restype, argtypes = _capi._PROTOTYPES["mlajit_attention_run"]
        self.mlajit_attention_run.restype, self.mlajit_attention_run.argtypes = restype, argtypes

    def __getitem__(self, name):
        assert name == "mlajit_attention_run", name
        function = self._libc["memcmp"]  # a new function object each time, as CDLL[name]
        function.restype = ctypes.c_int
        return function


class RecordingLibrary(FakeLibrary):
    """Records each run's (handle, RunArgs copy, stream); run returns `status`."""

    def __init__(self, status=0):
        super().__init__()
        self.runs, self.status = [], status
        self.mlajit_attention_create = self._create

    def _create(self, shape, options, out):
        ctypes.cast(out, ctypes.POINTER(ctypes.c_void_p))[0] = 0x1234  # a non-NULL handle
        return 0

    def _record(self, handle, args, stream):
        address = args if isinstance(args, int) else ctypes.addressof(args._obj)
        copy = _capi.RunArgs.from_buffer_copy(ctypes.string_at(address, ctypes.sizeof(_capi.RunArgs)))
        self.runs.append((handle, copy, stream))
        return self.status

    def __getitem__(self, name):
        assert name == "mlajit_attention_run", name
        return _Callable(self._record)


class _Callable:
    """A Python function with a foreign function's settable restype/argtypes."""

    def __init__(self, function):
        self.function, self.restype, self.argtypes = function, None, None

    def __call__(self, *args):
        return self.function(*args)
