"""Pure-Python host cost of BatchMlaAttention.run(), on a machine without a GPU or torch.

The library is replaced by a fake whose run function is a real ctypes foreign call that does no
work (libc memcmp with a zero length: stream None), so the figure includes ctypes argument
conversion and the GIL release, but not the C ABI's own ~4 us. Tensors are fakes that mimic
torch.Tensor's API (data_ptr(), stride(), get_device(), is_cuda, shape, dtype, device), with
properties that build a fresh object per access as torch does, and __cuda_array_interface__
objects. Stream lookup is not exercised (torch is not imported here); bench_overhead.py on a GPU
gives the whole figure. Prints one line per tensor kind: median microseconds per run()."""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mlajit  # noqa: E402
from mlajit import _capi  # noqa: E402
from fakes import BF16, F32, I32, FakeDeviceArray, FakeLibrary, FakeTorchTensor  # noqa: E402,F401


def time_runs(attention, tensors, calls, chunk):
    run = attention.run
    for _ in range(200):
        run(**tensors)
    samples = []
    for _ in range(calls // chunk):
        start = time.perf_counter()
        for _ in range(chunk):
            run(**tensors)
        samples.append((time.perf_counter() - start) / chunk * 1e6)
    return statistics.median(samples)


def main(calls=20000, chunk=100):
    _capi._library = FakeLibrary()
    assert "torch" not in sys.modules, "run without torch: the stream lookup would be exercised"
    heads, page = 16, 64
    attention = mlajit.BatchMlaAttention(num_heads=heads, device=0)
    torch_like = dict(q_nope=FakeTorchTensor((1, heads, 512)), q_pe=FakeTorchTensor((1, heads, 64)),
                      ckv=FakeTorchTensor((2, page, 512)), kpe=FakeTorchTensor((2, page, 64)),
                      kv_indices=FakeTorchTensor((2,), I32), out=FakeTorchTensor((1, heads, 512)),
                      sm_scale=0.07)
    with_lse = dict(torch_like, lse=FakeTorchTensor((1, heads), F32))
    f16 = mlajit.BatchMlaAttention(num_heads=heads, dtype="float16", device=0)
    interface = dict(q_nope=FakeDeviceArray((1, heads, 512)), q_pe=FakeDeviceArray((1, heads, 64)),
                     ckv=FakeDeviceArray((2, page, 512)), kpe=FakeDeviceArray((2, page, 64)),
                     kv_indices=FakeDeviceArray((2,), "<i4"), out=FakeDeviceArray((1, heads, 512)),
                     sm_scale=0.07)
    for what, obj, tensors in (("torch-like", attention, torch_like),
                               ("torch-like + lse", attention, with_lse),
                               ("__cuda_array_interface__", f16, interface)):
        print(f"host-only run(), {what} tensors: median {time_runs(obj, tensors, calls, chunk):.2f} "
              f"us per call ({calls} calls, chunks of {chunk})")


if __name__ == "__main__":
    main()
