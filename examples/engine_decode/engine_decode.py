#!/usr/bin/env python3
"""An engine-shaped decode loop over mlajit: what a serving engine (SGLang, vLLM) does each step.

    python3 examples/engine_decode/engine_decode.py --steps 8            # bf16 cache
    python3 examples/engine_decode/engine_decode.py --steps 8 --kv-dtype e4m3

The pieces, in the order an engine meets them:

* KV cache: ONE tensor [num_pages][page_size][576] (512 compressed-KV columns, then 64 RoPE
  columns), as SGLang keeps it. mlajit reads it through two strided views, ckv = cache[..., :512]
  and kpe = cache[..., 512:]; nothing is copied or split.
* Page allocator: a free list. A request owns a list of pages (its page table) and takes one more
  page whenever an appended token does not fit; pages go back when it finishes (or when rejected
  speculative tokens leave a page empty).
* Batch: every step some requests decode one token (q_len 1) and others verify 1-3 draft tokens
  (speculative decode: q_len 2-4, causal among themselves); requests finish and new ones join.
  The new tokens' KV is appended to the cache BEFORE attention, as an engine's layer does.
* Per step, on the host: build qo_indptr / kv_indptr / kv_len / kv_indices, call plan() once.
  Then copy q and kv_indices into FIXED device buffers and replay ONE CUDA graph, captured once
  at start-up around run() on those buffers.
* Check: every step's output against a float32 torch reference on the GPU (max relative L2 error
  over the requests; exit code 1 above --tolerance).

Which mlajit is used: with MLAJIT_LIBRARY set, the binding from this source tree (python/), so the
binding matches the library the variable names; otherwise the installed package (`pip install .`),
or the tree's binding when none is installed.
"""
import argparse
import math
import os
import random
import sys
import time

_TREE_PYTHON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")


def _import_mlajit():
    if os.environ.get("MLAJIT_LIBRARY") and os.path.isdir(os.path.join(_TREE_PYTHON, "mlajit")):
        sys.path.insert(0, os.path.abspath(_TREE_PYTHON))
    try:
        import mlajit as module
    except ImportError:
        sys.path.insert(0, os.path.abspath(_TREE_PYTHON))
        import mlajit as module
    return module


mlajit = _import_mlajit()

try:  # --help and the test's skip path work without torch
    import torch
except ImportError:  # pragma: no cover
    torch = None

CKV, KPE = 512, 64          # DeepSeek-V3's compressed KV and RoPE widths
ROW = CKV + KPE             # one cached token: [ckv | kpe] = 576 values
SM_SCALE = 1 / math.sqrt(128 + 64)  # the query head dim before absorption (qk_nope 128 + rope 64)
E4M3_MAX = 448.0            # the largest float8_e4m3fn value


# ---- the KV cache and its pages -----------------------------------------------------------

class PageAllocator:
    """Free list of page ids. Shuffled, so a request's pages are scattered over the cache as
    they are in an engine that has run a while (the kernel must follow the page table)."""

    def __init__(self, num_pages, rng):
        self.num_pages = num_pages
        self.free = list(range(num_pages))
        rng.shuffle(self.free)

    def allocate(self):
        if not self.free:
            # The pool is sized for the largest batch at its longest (see main), so this is a
            # bug in the example; an engine would preempt a request here instead.
            raise RuntimeError("out of KV cache pages")
        return self.free.pop()

    def release(self, pages):
        self.free.extend(pages)

    @property
    def used(self):
        return self.num_pages - len(self.free)


class Request:
    """One sequence: `kv_len` tokens in the cache, held in `pages` (its page table, in order)."""

    def __init__(self, request_id, steps_to_live):
        self.id = request_id
        self.kv_len = 0
        self.pages = []
        self.steps_left = steps_to_live
        self.q_len = 1  # query tokens this step: 1 (decode) or 2-4 (speculative verification)

    def resize(self, new_len, allocator, page_size):
        """Grows (page by page) or shrinks the page table to hold new_len tokens."""
        while len(self.pages) * page_size < new_len:
            self.pages.append(allocator.allocate())
        keep = -(-new_len // page_size)
        if keep < len(self.pages):
            allocator.release(self.pages[keep:])
            del self.pages[keep:]
        self.kv_len = new_len


class PagedKvCache:
    """The concatenated [num_pages][page_size][576] cache, ckv and kpe as views of it."""

    def __init__(self, num_pages, page_size, kv_dtype, device):
        self.page_size = page_size
        self.fp8 = kv_dtype == torch.float8_e4m3fn
        # Zero bytes are +0 in both dtypes; allocating as bytes avoids relying on float8 fills.
        self.data = torch.zeros(num_pages, page_size, ROW * kv_dtype.itemsize, dtype=torch.uint8,
                                device=device).view(kv_dtype)
        # Strided views: token stride 576, page stride page_size * 576, in both. mlajit takes
        # them as they are (kpe starts 512 elements into each row: 1024 bytes in bf16, 512 in
        # e4m3, 16-byte aligned either way).
        self.ckv = self.data[..., :CKV]
        self.kpe = self.data[..., CKV:]
        # Per-tensor dequantization scales of an e4m3 cache (fixed here; an engine calibrates
        # them). The kpe columns hold values twice as large, so their scale differs.
        self.scale_ckv = 5.0 / E4M3_MAX
        self.scale_kpe = 10.0 / E4M3_MAX

    def write(self, page_ids, slots, rows):
        """Stores rows [n, 576] (float32) at (page_ids[i], slots[i]), as a layer's KV write."""
        if not self.fp8:
            self.data[page_ids, slots] = rows.to(self.data.dtype)
            return
        quantized = torch.cat([
            (rows[:, :CKV] / self.scale_ckv).clamp(-E4M3_MAX, E4M3_MAX),
            (rows[:, CKV:] / self.scale_kpe).clamp(-E4M3_MAX, E4M3_MAX)], dim=1)
        # Indexed stores into float8 tensors are not implemented everywhere: store the bytes.
        self.data.view(torch.uint8)[page_ids, slots] = \
            quantized.to(torch.float8_e4m3fn).view(torch.uint8)

    def tokens_of(self, request):
        """The request's cached tokens as float32 [kv_len, 576], dequantized (the reference's
        view of what the kernel reads)."""
        if self.fp8:  # gathered as bytes, as written (see write())
            stored = self.data.view(torch.uint8)[request.pages].view(torch.float8_e4m3fn)
        else:
            stored = self.data[request.pages]
        rows = stored.reshape(-1, ROW)[:request.kv_len].float()
        if self.fp8:
            rows[:, :CKV] *= self.scale_ckv
            rows[:, CKV:] *= self.scale_kpe
        return rows


def append_tokens(cache, requests_and_counts, allocator, generator):
    """Appends `count` new tokens' KV to each request (random values stand in for the model's
    projection), allocating pages as needed; one batched write into the cache."""
    page_ids, slots = [], []
    for request, count in requests_and_counts:
        start = request.kv_len
        request.resize(start + count, allocator, cache.page_size)
        for position in range(start, start + count):
            page_ids.append(request.pages[position // cache.page_size])
            slots.append(position % cache.page_size)
    if not page_ids:
        return
    device = cache.data.device
    rows = torch.randn(len(page_ids), ROW, generator=generator, device=device)
    rows[:, CKV:] *= 2  # RoPE keys on another scale than the latent: separate fp8 scales matter
    cache.write(torch.tensor(page_ids, device=device), torch.tensor(slots, device=device), rows)


# ---- the batch, as plan() wants it ----------------------------------------------------------

def batch_arrays(requests, padded_tokens):
    """Host CSR arrays for plan() and the flat page list for kv_indices.

    The graph was captured with run() on `padded_tokens` query rows, and run() checks that its
    token count equals the plan's (qo_indptr[-1]). So the batch is padded to exactly that many
    rows with one dummy request of kv_len 0 and no pages: its rows attend to nothing (the kernel
    writes out = 0 for them and reads no KV), and nobody reads them. Padding is not free: the
    kernel still writes those zero rows (heads x 512 values each), which is why engines capture
    one graph per batch-size bucket and pad only up to the bucket; one graph keeps this short."""
    qo_indptr, kv_indptr, kv_len, kv_indices = [0], [0], [], []
    for request in requests:
        qo_indptr.append(qo_indptr[-1] + request.q_len)
        kv_indices.extend(request.pages)
        kv_indptr.append(len(kv_indices))
        kv_len.append(request.kv_len)
    padding = padded_tokens - qo_indptr[-1]
    if padding < 0:
        raise ValueError(f"{qo_indptr[-1]} query tokens exceed the graph's {padded_tokens}")
    if padding:
        qo_indptr.append(padded_tokens)
        kv_indptr.append(len(kv_indices))  # no pages
        kv_len.append(0)
    return qo_indptr, kv_indptr, kv_len, kv_indices


# ---- the reference --------------------------------------------------------------------------

def reference_attention(q, kv, q_len):
    """float32 MLA (absorbed form) of one request: q [q_len, heads, 576] against its cached
    tokens kv [kv_len, 576]; [q_nope | q_pe] . [ckv | kpe] is q_nope . ckv + q_pe . kpe.
    Causal, bottom-right aligned: query i sees tokens t <= kv_len - q_len + i."""
    kv_len = kv.shape[0]
    scores = torch.einsum("qhd,td->qht", q, kv) * SM_SCALE
    visible = (torch.arange(kv_len, device=kv.device)[None, :] <=
               kv_len - q_len + torch.arange(q_len, device=kv.device)[:, None])
    scores = scores.masked_fill(~visible[:, None, :], float("-inf"))
    return torch.einsum("qht,td->qhd", torch.softmax(scores, dim=-1), kv[:, :CKV])


def check_step(out, q, requests, cache):
    """Max over requests of ||out - ref|| / ||ref|| (relative L2, per request)."""
    worst, row = 0.0, 0
    for request in requests:
        rows = slice(row, row + request.q_len)
        want = reference_attention(q[rows].float(), cache.tokens_of(request), request.q_len)
        got = out[rows].float()
        error = ((got - want).norm() / want.norm().clamp_min(1e-30)).item()
        if not math.isfinite(error):
            error = math.inf
        worst = max(worst, error)
        row += request.q_len
    return worst


# ---- the engine ------------------------------------------------------------------------------

def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Engine-shaped MLA decode loop over mlajit: a concatenated paged cache, "
                    "a plan per step, one CUDA graph replayed, checked against torch.")
    parser.add_argument("--steps", type=int, default=8, help="decode steps (default 8)")
    parser.add_argument("--max-batch", type=int, default=32,
                        help="most requests in a step (default 32)")
    parser.add_argument("--heads", type=int, default=128, help="query heads (default 128)")
    parser.add_argument("--page-size", type=int, default=64, help="tokens per page (default 64)")
    parser.add_argument("--max-prompt", type=int, default=2048,
                        help="longest prompt a joining request brings (default 2048)")
    parser.add_argument("--max-q-len", type=int, default=4,
                        help="most query tokens of a speculative request (default 4)")
    parser.add_argument("--spec-fraction", type=float, default=0.5,
                        help="share of requests verifying draft tokens each step (default 0.5)")
    parser.add_argument("--kv-dtype", choices=("bf16", "e4m3"), default="bf16",
                        help="KV cache dtype; e4m3 uses per-tensor scales (default bf16)")
    parser.add_argument("--kernel", default="auto", help="kernel family (default auto)")
    parser.add_argument("--tolerance", type=float, default=1e-2,
                        help="largest relative L2 error accepted (default 1e-2)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.steps < 1 or args.max_batch < 1 or args.max_prompt < 1 or args.page_size < 1:
        parser.error("--steps, --max-batch, --max-prompt and --page-size must be >= 1")
    if not 1 <= args.max_q_len <= 64:
        parser.error("--max-q-len must be in 1..64")
    return args


def workspace_to_reserve(attention_options, candidate_batches, padded_tokens):
    """Bytes of workspace to reserve so that no step's plan moves the workspace under the graph.

    The library's advice: plan the largest batch once on an object with the same options and no
    reservation, and read plan_info()['workspace_bytes_needed']. Which batch is largest for the
    planner depends on lengths as well as counts, so several are planned (longest requests,
    many short ones, one long one alone, random mixes like the loop's), each on a fresh object
    (growing one object's workspace would log a warning), and twice the largest need is
    reserved. Should a step still need more, plan() refuses with an error naming the bytes,
    rather than moving the workspace under the captured graph."""
    needed = 0
    for requests in candidate_batches:
        probe = mlajit.BatchMlaAttention(**attention_options, workspace_bytes=0)
        probe.plan(*batch_arrays(requests, padded_tokens)[:3])
        needed = max(needed, probe.plan_info()["workspace_bytes_needed"])
        probe.close()
    return 2 * needed


def probe_batches(args, longest, rng):
    """Batches (lists of Request-like objects; only q_len, kv_len and page counts matter to
    plan()) for workspace_to_reserve."""

    def batch(lengths_and_q_lens):
        requests = []
        for kv_len, q_len in lengths_and_q_lens:
            request = Request(-1, 0)
            request.kv_len, request.q_len = kv_len, q_len
            request.pages = [0] * -(-kv_len // args.page_size)  # counts only: ids are not read
            requests.append(request)
        return requests

    full, top = args.max_batch, args.max_q_len
    batches = [batch([(longest, top)] * full), batch([(longest, 1)] * full),
               batch([(longest, top)]), batch([(top, top)] * full), batch([(1, 1)])]
    for _ in range(8):
        batches.append(batch([(rng.randint(top, longest), rng.choice([1, top]))
                              for _ in range(rng.randint(1, full))]))
    return batches


def composition(requests):
    counts = {}
    for request in requests:
        counts[request.q_len] = counts.get(request.q_len, 0) + 1
    parts = [f"{counts.pop(1)} decode"] if 1 in counts else []
    parts += [f"{n}x q_len {q_len}" for q_len, n in sorted(counts.items())]
    return ", ".join(parts) or "empty"


def main(argv=None):
    args = parse_args(argv)
    if torch is None:
        print("engine_decode: needs PyTorch (pip install torch)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("engine_decode: needs a CUDA GPU (torch sees none)", file=sys.stderr)
        return 2
    device = torch.device("cuda", torch.cuda.current_device())
    rng = random.Random(args.seed)
    generator = torch.Generator(device=device).manual_seed(args.seed)
    q_dtype = torch.bfloat16
    kv_dtype = torch.float8_e4m3fn if args.kv_dtype == "e4m3" else torch.bfloat16

    # Sizes fixed at start-up, as an engine fixes them: the most requests and query tokens a
    # step may hold (the graph's buffers), and a page pool that fits the largest batch at the
    # longest any request can get (prompt + one max_q_len per step).
    padded_tokens = args.max_batch * args.max_q_len
    longest = args.max_prompt + args.steps * args.max_q_len
    pages_per_request = -(-longest // args.page_size)
    num_pages = args.max_batch * pages_per_request
    cache = PagedKvCache(num_pages, args.page_size, kv_dtype, device)
    allocator = PageAllocator(num_pages, rng)

    # Graph capture needs a grid that does not depend on the batch (cluster_size pinned) and a
    # workspace that never moves (workspace_bytes reserved): the graph holds the workspace's
    # address, and each plan() rewrites the work lists inside it, which the replays then read.
    # causal: the speculative tokens' mask (a q_len 1 request sees its whole cache either way).
    # kv_dtype: only an e4m3 cache needs saying; a bf16 one is the queries' dtype (None).
    options = dict(num_heads=args.heads, page_size=args.page_size, dtype=q_dtype, causal=True,
                   kv_dtype=kv_dtype if kv_dtype != q_dtype else None, kernel=args.kernel,
                   cluster_size=1)
    reserve = workspace_to_reserve(options, probe_batches(args, longest, rng), padded_tokens)
    attention = mlajit.BatchMlaAttention(**options, workspace_bytes=reserve)

    # The fixed device buffers the graph reads and writes. q is [tokens][heads][576] as the
    # model produces it (absorbed q_nope | q_pe); q_nope and q_pe are views, like ckv and kpe.
    static_q = torch.zeros(padded_tokens, args.heads, ROW, dtype=q_dtype, device=device)
    static_out = torch.zeros(padded_tokens, args.heads, CKV, dtype=q_dtype, device=device)
    static_kv_indices = torch.zeros(num_pages, dtype=torch.int32, device=device)
    run_kwargs = dict(sm_scale=SM_SCALE, out=static_out)
    if cache.fp8:
        # As one-element device tensors, the scales are read by the kernel at every replay: an
        # engine can recalibrate them in place without capturing again.
        run_kwargs["kv_scale_ckv"] = torch.tensor([cache.scale_ckv], dtype=torch.float32,
                                                  device=device)
        run_kwargs["kv_scale_kpe"] = torch.tensor([cache.scale_kpe], dtype=torch.float32,
                                                  device=device)

    def run_attention():
        attention.run(static_q[..., :CKV], static_q[..., CKV:], cache.ckv, cache.kpe,
                      static_kv_indices, **run_kwargs)

    # Capture once, before any request exists: plan an all-padding batch of the graph's token
    # count, run once eagerly (loads the kernel, encodes the cache's tensor maps), then capture.
    attention.plan(*batch_arrays([], padded_tokens)[:3])
    run_attention()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run_attention()
    torch.cuda.synchronize()
    print(f"mlajit {mlajit.version()} on {torch.cuda.get_device_name(device)}: "
          f"{attention.spec_text()}")
    print(f"{args.heads} heads, {args.kv_dtype} cache [{num_pages}][{args.page_size}][{ROW}], "
          f"graph over {padded_tokens} query rows, workspace {reserve / 2**20:.1f} MiB reserved")

    active, next_id, failures = [], 0, 0
    start_event = torch.cuda.Event(enable_timing=True)
    end_event = torch.cuda.Event(enable_timing=True)
    for step in range(args.steps):
        # Scheduling: finished requests give their pages back; new ones join while there is
        # room (the first step starts three quarters full, later steps admit up to 4).
        finished = [r for r in active if r.steps_left == 0]
        for request in finished:
            allocator.release(request.pages)
        active = [r for r in active if r.steps_left > 0]
        room = args.max_batch - len(active)
        joining = []
        for _ in range(min(room, max(1, 3 * args.max_batch // 4) if step == 0 else 4)):
            joining.append(Request(next_id, rng.randint(1, 2 * args.steps)))
            next_id += 1
        # A joining request's prompt is prefilled: its KV lands in the cache now (the prefill's
        # own attention is not this example's subject).
        append_tokens(cache, [(r, rng.randint(1, args.max_prompt)) for r in joining],
                      allocator, generator)
        active += joining

        # This step's query tokens: decode, or verification of max_q_len - 1 draft tokens or
        # fewer. Their KV is appended first; then each query attends to the cache up to itself.
        for request in active:
            speculative = args.max_q_len > 1 and rng.random() < args.spec_fraction
            request.q_len = rng.randint(2, args.max_q_len) if speculative else 1
        append_tokens(cache, [(r, r.q_len) for r in active], allocator, generator)
        tokens = sum(r.q_len for r in active)
        q = (torch.randn(tokens, args.heads, ROW, generator=generator, device=device) * 0.5
             ).to(q_dtype)

        # Host: the batch's arrays and one plan() (it uploads the work lists into the reserved
        # workspace on the current stream, where the replay below follows it).
        qo_indptr, kv_indptr, kv_len, kv_indices = batch_arrays(active, padded_tokens)
        plan_start = time.perf_counter()
        attention.plan(qo_indptr, kv_indptr, kv_len)
        plan_us = (time.perf_counter() - plan_start) * 1e6

        # Device: this step's inputs into the graph's fixed buffers (rows past `tokens` and ids
        # past len(kv_indices) keep stale values; nothing reads them), then one replay.
        static_q[:tokens].copy_(q)
        static_kv_indices[:len(kv_indices)].copy_(torch.tensor(kv_indices, dtype=torch.int32))
        static_out.fill_(float("nan"))  # so a row the kernel failed to write cannot pass
        start_event.record()
        graph.replay()
        end_event.record()
        end_event.synchronize()
        replay_us = start_event.elapsed_time(end_event) * 1e3

        error = check_step(static_out, q, active, cache)
        ok = error <= args.tolerance
        failures += not ok
        lengths = [r.kv_len for r in active]
        print(f"step {step}: {len(active)} requests ({composition(active)}; "
              f"+{len(joining)} joined, -{len(finished)} finished), {tokens} query tokens "
              f"(+{padded_tokens - tokens} padding), kv {min(lengths)}..{max(lengths)} tokens, "
              f"{allocator.used} pages | plan {plan_us:.0f} us, replay {replay_us:.1f} us, "
              f"max rel L2 err {error:.2e}{'' if ok else '  FAIL'}")

        # Verification's outcome: of a speculative request's q_len tokens, the first one and
        # some of the drafts are accepted; the rejected drafts' KV is dropped (their slots are
        # overwritten later, an emptied page goes back to the pool).
        for request in active:
            accepted = rng.randint(1, request.q_len)
            request.resize(request.kv_len - request.q_len + accepted, allocator, args.page_size)
            request.steps_left -= 1

    attention.close()
    if failures:
        print(f"FAILED: {failures} of {args.steps} steps above the tolerance {args.tolerance:g}")
        return 1
    print(f"ok: {args.steps} steps within {args.tolerance:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
