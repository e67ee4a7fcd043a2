"""Host overhead of BatchMlaAttention.run() through the Python binding, and of the same call
through the torch custom op (torch.ops.mlajit.run, eager): median microseconds per call over
many calls of a tiny decode batch, launched on one stream without synchronising each call.
Prints one line each. Needs torch, CUDA and libmlajit (MLAJIT_LIBRARY, or an installed mlajit
with MLAJIT_TEST_INSTALLED=1)."""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import which_mlajit  # noqa: E402

which_mlajit.use_source_tree()
import mlajit  # noqa: E402
import torch  # noqa: E402


def median_us(call, calls, chunk):
    for _ in range(100):
        call()
    torch.cuda.synchronize()
    samples = []
    for _ in range(calls // chunk):  # time chunks: a perf_counter per call would dominate
        start = time.perf_counter()
        for _ in range(chunk):
            call()
        samples.append((time.perf_counter() - start) / chunk * 1e6)
        torch.cuda.synchronize()  # keep the launch queue from filling up
    return statistics.median(samples)


def main(calls=10000, chunk=100):
    heads, page = 16, 64
    attention = mlajit.BatchMlaAttention(num_heads=heads)
    make = lambda *shape: torch.randn(*shape, device="cuda").to(torch.bfloat16)  # noqa: E731
    q_nope, q_pe = make(1, heads, 512), make(1, heads, 64)
    ckv, kpe = make(2, page, 512), make(2, page, 64)
    kv_indices = torch.tensor([0, 1], dtype=torch.int32, device="cuda")
    out = torch.empty_like(q_nope)
    attention.plan([0, 1], [0, 2], [100])
    binding = median_us(lambda: attention.run(q_nope, q_pe, ckv, kpe, kv_indices, 0.07, out=out),
                        calls, chunk)
    print(f"python binding run(): median {binding:.2f} us per call ({calls} calls, "
          f"chunks of {chunk})")
    available, why = mlajit.torch_op_available()
    if not available:
        print(f"torch.ops.mlajit.run: not registered ({why})")
        return
    handle, op = attention.op_handle, torch.ops.mlajit.run
    eager_op = median_us(lambda: op(q_nope, q_pe, ckv, kpe, kv_indices, out, None, 0.07, handle),
                         calls, chunk)
    print(f"torch.ops.mlajit.run (eager): median {eager_op:.2f} us per call")


if __name__ == "__main__":
    main()
