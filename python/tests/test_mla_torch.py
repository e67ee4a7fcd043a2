"""The Python binding on a GPU, against a float64 PyTorch reference of MLA (absorbed form):
    s = (q_nope . ckv + q_pe . kpe) * sm_scale,  out = softmax(s) . ckv,  lse = log2 sum exp(s)
Skipped (with the reason) without torch, CUDA or libmlajit (set MLAJIT_LIBRARY)."""
import math
import os
import random
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import which_mlajit  # noqa: E402

which_mlajit.use_source_tree()  # the tree's package, unless MLAJIT_TEST_INSTALLED=1
import mlajit  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

SEED = int(os.environ.get("MLAJIT_TEST_SEED", "1234"))


def skip_reason():
    if torch is None:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    try:
        mlajit._capi.library()
    except OSError as error:
        return f"libmlajit.so not found: {error}"
    return None


def make_problem(kv_lens, q_lens, heads, ckv, kpe, page, dtype, generator, num_pages=None,
                 concatenated=False):
    """Random paged cache (pages in shuffled order) and queries, on cuda."""
    pages_per = [(n + page - 1) // page for n in kv_lens]
    total = num_pages or sum(pages_per) + 3
    order = torch.randperm(total, generator=generator).tolist()
    kv_indptr, kv_indices = [0], []
    for count in pages_per:
        kv_indices += order[len(kv_indices):len(kv_indices) + count]
        kv_indptr.append(len(kv_indices))
    qo_indptr = [0]
    for n in q_lens:
        qo_indptr.append(qo_indptr[-1] + n)
    tokens = qo_indptr[-1]

    def rand(*shape):
        return (torch.rand(*shape, generator=generator) - 0.5).to("cuda", dtype)

    if concatenated:  # one [pages][page][ckv + kpe] cache, as SGLang/vLLM keep it
        cache = rand(total, page, ckv + kpe)
        ckv_t, kpe_t = cache[..., :ckv], cache[..., ckv:]
    else:
        ckv_t, kpe_t = rand(total, page, ckv), rand(total, page, kpe)
    return dict(q_nope=rand(tokens, heads, ckv), q_pe=rand(tokens, heads, kpe), ckv=ckv_t, kpe=kpe_t,
                kv_indices=torch.tensor(kv_indices, dtype=torch.int32, device="cuda"),
                qo_indptr=qo_indptr, kv_indptr=kv_indptr, kv_len=list(kv_lens), page=page)


def reference(p, sm_scale, causal, dtype=None):
    """out [tokens, heads, ckv] and lse (base 2) [tokens, heads] in `dtype` (float64)."""
    dtype = dtype or torch.float64
    outs, lses = [], []
    indices = p["kv_indices"].tolist()
    for r, kv_len in enumerate(p["kv_len"]):
        q0, q1 = p["qo_indptr"][r], p["qo_indptr"][r + 1]
        pages = indices[p["kv_indptr"][r]:p["kv_indptr"][r + 1]]
        ckv = p["ckv"][pages].reshape(-1, p["ckv"].shape[-1])[:kv_len].to(dtype)
        kpe = p["kpe"][pages].reshape(-1, p["kpe"].shape[-1])[:kv_len].to(dtype)
        qn, qp = p["q_nope"][q0:q1].to(dtype), p["q_pe"][q0:q1].to(dtype)
        s = (torch.einsum("qhd,td->qht", qn, ckv) + torch.einsum("qhd,td->qht", qp, kpe)) * sm_scale
        if causal:
            q_len = q1 - q0
            allowed = torch.arange(kv_len, device=s.device)[None, :] <= (
                kv_len - q_len + torch.arange(q_len, device=s.device)[:, None])
            s = s.masked_fill(~allowed[:, None, :], float("-inf"))
        lse = torch.logsumexp(s, dim=-1)
        outs.append(torch.einsum("qht,td->qhd", torch.softmax(s, dim=-1), ckv))
        lses.append(lse / math.log(2))
    return torch.cat(outs), torch.cat(lses)


class MlaAgainstTorchReference(unittest.TestCase):
    def setUp(self):
        reason = skip_reason()
        if reason:
            self.skipTest(reason)
        self.generator = torch.Generator().manual_seed(SEED)
        random.seed(SEED)
        print(f"seed {SEED} (set MLAJIT_TEST_SEED to repeat)")

    def check_close(self, got, want, tolerance, what):
        error = (got.double() - want.double()).abs().max().item()
        self.assertLess(error, tolerance, f"{what}: max abs error {error:.3e} (seed {SEED})")

    def run_case(self, kv_lens, q_lens, heads=128, ckv=512, kpe=64, page=64, dtype=None,
                 causal=False, concatenated=False, tolerance=2e-2):
        dtype = dtype or torch.bfloat16
        p = make_problem(kv_lens, q_lens, heads, ckv, kpe, page, dtype, self.generator,
                         concatenated=concatenated)
        attention = mlajit.BatchMlaAttention(num_heads=heads, head_dim_ckv=ckv, head_dim_kpe=kpe,
                                             page_size=page, dtype=dtype, causal=causal)
        attention.plan(p["qo_indptr"], p["kv_indptr"], p["kv_len"])
        scale = 1 / math.sqrt(192)
        lse = torch.empty(p["q_nope"].shape[:2], dtype=torch.float32, device="cuda")
        out = attention.run(p["q_nope"], p["q_pe"], p["ckv"], p["kpe"], p["kv_indices"], scale,
                            lse=lse)
        torch.cuda.synchronize()
        want_out, want_lse = reference(p, scale, causal)
        self.check_close(out, want_out, tolerance, "out")
        self.check_close(lse, want_lse, 1e-2, "lse")
        return attention

    def test_deepseek_decode_bf16(self):
        kv_lens = [random.randint(1, 3000) for _ in range(9)] + [64, 1]
        self.run_case(kv_lens, [1] * len(kv_lens))

    def test_minicpm3_causal_prefill_f16_small_pages(self):
        kv_lens = [37, 300, 129]
        self.run_case(kv_lens, [5, 17, 1], heads=40, ckv=256, kpe=32, page=16,
                      dtype=torch.float16, causal=True)

    def test_concatenated_cache_views(self):
        self.run_case([500, 77, 1024], [1, 2, 1], concatenated=True)

    def test_cuda_graph_replays_across_inputs_and_replans(self):
        heads, scale = 128, 1 / math.sqrt(192)
        attention = mlajit.BatchMlaAttention(num_heads=heads, cluster_size=1,
                                             workspace_bytes=64 << 20)
        first = make_problem([700, 33, 2048, 5], [1] * 4, heads, 512, 64, 64, torch.bfloat16,
                             self.generator, num_pages=64)
        second = make_problem([100, 1500, 64, 999], [1] * 4, heads, 512, 64, 64, torch.bfloat16,
                              self.generator, num_pages=64)
        static = {k: first[k].clone() for k in ("q_nope", "q_pe", "ckv", "kpe")}
        static["kv_indices"] = torch.zeros(64, dtype=torch.int32, device="cuda")
        static["kv_indices"][:len(first["kv_indices"])] = first["kv_indices"]
        out = torch.empty_like(static["q_nope"])
        attention.plan(first["qo_indptr"], first["kv_indptr"], first["kv_len"])
        attention.run(**static, sm_scale=scale, out=out)  # warm up outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            attention.run(**static, sm_scale=scale, out=out)
        for problem in (first, second):
            if problem is second:  # new batch: re-plan (same token count), new data, same graph
                attention.plan(problem["qo_indptr"], problem["kv_indptr"], problem["kv_len"])
            for key in ("q_nope", "q_pe", "ckv", "kpe"):
                static[key].copy_(problem[key])
            static["kv_indices"][:len(problem["kv_indices"])] = problem["kv_indices"]
            out.zero_()
            graph.replay()
            torch.cuda.synchronize()
            want, _ = reference(problem, scale, causal=False)
            self.check_close(out, want, 2e-2, "graph replay")

    def test_fp8_kv_cache_with_float_and_device_scales(self):
        """An e4m3 cache, per-tensor scales as floats, as one-element tensors, and as tensors a
        captured graph reads anew at each replay; the reference reads the dequantized cache."""
        heads, scale = 128, 1 / math.sqrt(192)
        kv_lens = [random.randint(1, 3000) for _ in range(5)] + [64, 1]
        p = make_problem(kv_lens, [1] * len(kv_lens), heads, 512, 64, 64, torch.bfloat16,
                         self.generator)
        fp8, kv_scales = {}, {}
        for key in ("ckv", "kpe"):
            kv_scales[key] = p[key].float().abs().max().item() / 448  # e4m3's largest value
            fp8[key] = (p[key].float() / kv_scales[key]).to(torch.float8_e4m3fn)
            p[key] = fp8[key].float() * kv_scales[key]  # what the kernel is to read
        attention = mlajit.BatchMlaAttention(num_heads=heads, kv_dtype=torch.float8_e4m3fn,
                                             cluster_size=1, workspace_bytes=64 << 20)
        attention.plan(p["qo_indptr"], p["kv_indptr"], p["kv_len"])
        args = dict(q_nope=p["q_nope"], q_pe=p["q_pe"], ckv=fp8["ckv"], kpe=fp8["kpe"],
                    kv_indices=p["kv_indices"], sm_scale=scale)
        lse = torch.empty(p["q_nope"].shape[:2], dtype=torch.float32, device="cuda")
        want_out, want_lse = reference(p, scale, causal=False)

        out = attention.run(**args, lse=lse, kv_scale_ckv=kv_scales["ckv"],
                            kv_scale_kpe=kv_scales["kpe"])
        torch.cuda.synchronize()
        self.check_close(out, want_out, 2e-2, "fp8, float scales: out")
        self.check_close(lse, want_lse, 1e-2, "fp8, float scales: lse")

        ckv_scale = torch.tensor(kv_scales["ckv"], dtype=torch.float32, device="cuda")  # 0-dim
        kpe_scale = torch.tensor([kv_scales["kpe"]], dtype=torch.float32, device="cuda")
        out = attention.run(**args, lse=lse, kv_scale_ckv=ckv_scale, kv_scale_kpe=kpe_scale)
        torch.cuda.synchronize()
        self.check_close(out, want_out, 2e-2, "fp8, device scales: out")
        self.check_close(lse, want_lse, 1e-2, "fp8, device scales: lse")

        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            attention.run(**args, out=out, lse=lse, kv_scale_ckv=ckv_scale,
                          kv_scale_kpe=kpe_scale)
        ckv_scale.mul_(2)  # after the capture: the replay must read the new value
        out.zero_()
        graph.replay()
        torch.cuda.synchronize()
        want_out, want_lse = reference(dict(p, ckv=p["ckv"] * 2), scale, causal=False)
        self.check_close(out, want_out, 2e-2, "fp8, device scale updated after capture: out")
        self.check_close(lse, want_lse, 1e-2, "fp8, device scale updated after capture: lse")

    def test_deepseek_v32_fp8_cache_with_per_token_scales(self):
        """DeepSeek-V3.2's cache: one uint8 [pages, 64, 656] buffer whose token rows hold 512
        e4m3 codes, 4 float32 scales (one per 128 ckv values) and 64 bf16 kpe values, read
        through three views; the reference reads the dequantized ckv and the bf16 kpe. Also
        separate contiguous tensors, and a repeated call (run()'s cached path)."""
        scale = 1 / math.sqrt(192)
        for heads in (16, 128):
            kv_lens = [random.randint(1, 3000) for _ in range(5)] + [64, 65, 1]
            p = make_problem(kv_lens, [1] * len(kv_lens), heads, 512, 64, 64, torch.bfloat16,
                             self.generator)
            pages = p["ckv"].shape[0]
            blocks = p["ckv"].float().view(pages, 64, 4, 128)
            token_scales = blocks.abs().amax(-1).clamp_min(1e-6) / 448  # e4m3's largest value
            codes = (blocks / token_scales[..., None]).to(torch.float8_e4m3fn)
            cache = torch.zeros(pages, 64, 656, dtype=torch.uint8, device="cuda")
            ckv = cache[..., :512].view(torch.float8_e4m3fn)
            ckv_scales = cache[..., 512:528].view(torch.float32)
            kpe = cache[..., 528:].view(torch.bfloat16)
            self.assertEqual((ckv_scales.stride(), kpe.stride()),
                             ((64 * 164, 164, 1), (64 * 328, 328, 1)))
            ckv.copy_(codes.view(pages, 64, 512))
            ckv_scales.copy_(token_scales)
            kpe.copy_(p["kpe"])
            # what the kernel is to read: code * its block's scale; kpe as it is (bf16)
            p["ckv"] = (codes.float() * token_scales[..., None]).view(pages, 64, 512)
            want_out, want_lse = reference(p, scale, causal=False)

            attention = mlajit.BatchMlaAttention(num_heads=heads, kv_dtype=torch.float8_e4m3fn,
                                                 kv_scales="token128")
            attention.plan(p["qo_indptr"], p["kv_indptr"], p["kv_len"])
            layouts = (("one 656-byte-row buffer", ckv, kpe, ckv_scales),
                       ("one 656-byte-row buffer, again", ckv, kpe, ckv_scales),
                       ("separate tensors", ckv.contiguous(), kpe.contiguous(),
                        ckv_scales.contiguous()))
            for what, ckv_t, kpe_t, scales_t in layouts:
                what = f"V3.2 fp8 cache, {heads} heads, {what}"
                out = torch.full_like(p["q_nope"], float("nan"))
                lse = torch.full(p["q_nope"].shape[:2], float("nan"), device="cuda")
                attention.run(p["q_nope"], p["q_pe"], ckv_t, kpe_t, p["kv_indices"], scale,
                              out=out, lse=lse, ckv_scales=scales_t)
                torch.cuda.synchronize()
                self.assertTrue(torch.isfinite(out).all().item(), f"{what}: non-finite out")
                error = ((out.double() - want_out).norm() / want_out.norm()).item()
                print(f"{what}: ||out-ref||/||ref|| {error:.2e}")
                self.assertLess(error, 1e-2, f"{what}: relative L2 error (seed {SEED})")
                self.check_close(lse, want_lse, 1e-2, f"{what}: lse")

    def test_torch_argument_errors_name_the_argument(self):
        attention = mlajit.BatchMlaAttention(num_heads=16)
        p = make_problem([100], [1], 16, 512, 64, 64, torch.bfloat16, self.generator)
        attention.plan(p["qo_indptr"], p["kv_indptr"], p["kv_len"])
        args = {k: p[k] for k in ("q_nope", "q_pe", "ckv", "kpe", "kv_indices")}
        with self.assertRaisesRegex(ValueError, "q_pe is on cpu"):
            attention.run(**{**args, "q_pe": args["q_pe"].cpu()}, sm_scale=0.1)
        with self.assertRaisesRegex(TypeError, "ckv has dtype float16: expected bfloat16"):
            attention.run(**{**args, "ckv": args["ckv"].half()}, sm_scale=0.1)
        with self.assertRaisesRegex(TypeError, "kv_indices has dtype int64"):
            attention.run(**{**args, "kv_indices": args["kv_indices"].long()}, sm_scale=0.1)
        with self.assertRaisesRegex(ValueError, "q_nope must be contiguous in its last dimension"):
            attention.run(**{**args, "q_nope": args["q_nope"].transpose(0, 2).contiguous().transpose(0, 2)},
                          sm_scale=0.1)
        # A token count different from the plan's: the library's message, as MlajitError.
        with self.assertRaises(mlajit.MlajitError) as caught:
            attention.run(**{**args, "q_nope": torch.cat([args["q_nope"]] * 2),
                             "q_pe": torch.cat([args["q_pe"]] * 2)}, sm_scale=0.1)
        self.assertEqual(caught.exception.code, "INVALID_ARGUMENT")


class MergeStatesAgainstTorchReference(unittest.TestCase):
    """Each request's pages cut in parts, run() on every part, merge_states(_n), compared with
    the reference over all pages."""

    def setUp(self):
        reason = skip_reason()
        if reason:
            self.skipTest(reason)
        self.generator = torch.Generator().manual_seed(SEED + 1)
        random.seed(SEED + 1)
        print(f"seed {SEED} (set MLAJIT_TEST_SEED to repeat)")

    def parts_of(self, p, num_parts, empty_part=None):
        """(qo, kv_indptr, kv_len, kv_indices) of each part: consecutive page runs."""
        page, indices = p["page"], p["kv_indices"].tolist()
        parts = [([0], [], []) for _ in range(num_parts)]
        for r, kv_len in enumerate(p["kv_len"]):
            pages = indices[p["kv_indptr"][r]:p["kv_indptr"][r + 1]]
            drawn = num_parts - (empty_part is not None)
            cuts = sorted(random.randint(0, len(pages)) for _ in range(drawn - 1))
            cuts = [0] + cuts + [len(pages)]
            if empty_part is not None:
                cuts.insert(empty_part + 1, cuts[empty_part])
            for c, (indptr, lens, ids) in enumerate(parts):
                ids += pages[cuts[c]:cuts[c + 1]]
                indptr.append(len(ids))
                lens.append(max(0, min(kv_len, cuts[c + 1] * page) - cuts[c] * page))
        return parts

    def run_merge(self, num_parts, dtype, lse_base="2", empty_part=None, heads=16):
        kv_lens = [random.randint(0, 2000) for _ in range(5)] + [0]
        p = make_problem(kv_lens, [1] * len(kv_lens), heads, 512, 64, 16, dtype, self.generator)
        attention = mlajit.BatchMlaAttention(num_heads=heads, page_size=16, dtype=dtype,
                                             lse_base=lse_base)
        scale = 1 / math.sqrt(192)
        outs, lses = [], []
        for indptr, lens, ids in self.parts_of(p, num_parts, empty_part):
            attention.plan(p["qo_indptr"], indptr, lens)
            lse = torch.full(p["q_nope"].shape[:2], float("nan"), device="cuda")
            out = torch.full_like(p["q_nope"], float("nan"))
            attention.run(p["q_nope"], p["q_pe"], p["ckv"], p["kpe"],
                          torch.tensor(ids or [0], dtype=torch.int32, device="cuda"), scale,
                          out=out, lse=lse)
            torch.cuda.synchronize()
            outs.append(out)
            lses.append(lse)
        if num_parts == 2:
            out, lse = mlajit.merge_states(outs[0], lses[0], outs[1], lses[1], lse_base=lse_base)
        else:
            out, lse = mlajit.merge_states_n(outs, lses, lse_base=lse_base)
        torch.cuda.synchronize()
        want_out, want_lse = reference(p, scale, causal=False)
        if lse_base == "e":
            want_lse = want_lse * math.log(2)
        error = ((out.double() - want_out).norm() / want_out.norm()).item()
        print(f"merge {num_parts} {dtype} lse {lse_base}: ||out-ref||/||ref|| {error:.2e}")
        self.assertLess(error, 1e-2 if dtype == torch.bfloat16 else 3e-3)
        finite = torch.isfinite(want_lse)
        self.assertTrue(torch.equal(torch.isfinite(lse), finite), "lse -inf where the reference has it")
        self.assertLess((lse.double()[finite] - want_lse[finite]).abs().max().item(), 1e-2)

    def test_two_parts_both_dtypes_and_bases(self):
        for dtype in (torch.bfloat16, torch.float16):
            for base in ("2", "e"):
                self.run_merge(2, dtype, base)

    def test_n_parts_with_an_empty_one(self):
        self.run_merge(3, torch.bfloat16, "2", empty_part=1)
        self.run_merge(8, torch.float16, "e")

    def test_the_torch_op_writes_the_same_bits(self):
        available, why = mlajit.torch_op_available()
        if not available:
            self.skipTest(why)
        outs = [torch.randn(3, 16, 512, device="cuda").bfloat16() for _ in range(3)]
        lses = [torch.randn(3, 16, device="cuda") for _ in range(3)]
        lses[1][0, :] = float("-inf")
        eager, eager_lse = mlajit.merge_states_n(outs, lses)
        out, lse = torch.empty_like(eager), torch.empty_like(eager_lse)
        torch.ops.mlajit.merge_states(outs, lses, out, lse, False)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(out, eager))
        self.assertTrue(torch.equal(lse, eager_lse))


if __name__ == "__main__":
    unittest.main()
