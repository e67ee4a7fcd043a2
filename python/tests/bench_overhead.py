"""Host overhead of BatchMlaAttention.run() through the Python binding: median microseconds per
call over many calls of a tiny decode batch, launched on one stream without synchronising each
call. Prints one line. Needs torch, CUDA and libmlajit (MLAJIT_LIBRARY)."""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import mlajit  # noqa: E402
import torch  # noqa: E402


def main(calls=10000, chunk=100):
    heads, page = 16, 64
    attention = mlajit.BatchMlaAttention(num_heads=heads)
    make = lambda *shape: torch.randn(*shape, device="cuda").to(torch.bfloat16)  # noqa: E731
    q_nope, q_pe = make(1, heads, 512), make(1, heads, 64)
    ckv, kpe = make(2, page, 512), make(2, page, 64)
    kv_indices = torch.tensor([0, 1], dtype=torch.int32, device="cuda")
    out = torch.empty_like(q_nope)
    attention.plan([0, 1], [0, 2], [100])
    for _ in range(100):
        attention.run(q_nope, q_pe, ckv, kpe, kv_indices, 0.07, out=out)
    torch.cuda.synchronize()
    samples = []
    for _ in range(calls // chunk):  # time chunks: a perf_counter per call would dominate
        start = time.perf_counter()
        for _ in range(chunk):
            attention.run(q_nope, q_pe, ckv, kpe, kv_indices, 0.07, out=out)
        samples.append((time.perf_counter() - start) / chunk * 1e6)
        torch.cuda.synchronize()  # keep the launch queue from filling up
    print(f"python binding run(): median {statistics.median(samples):.2f} us per call "
          f"({calls} calls, chunks of {chunk})")


if __name__ == "__main__":
    main()
