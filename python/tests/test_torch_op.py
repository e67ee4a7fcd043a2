"""torch.ops.mlajit.run, the PyTorch custom op over BatchMlaAttention.run.

On the CPU (torch installed; no GPU, driver or libmlajit: a stand-in library): the op is
registered with its mutations in the schema, the fake implementation checks the arguments
against the attention object, and Dynamo (torch.export strict, the tracer torch.compile
fullgraph uses) traces a model step that calls it, over fake CUDA tensors.

On a GPU (torch with CUDA, libmlajit): a torch.compile(fullgraph=True) step gives the same bits
as the eager one, and so does a step that writes into tensors it was given; a CUDA graph
captured around the compiled step replays correctly after a re-plan; torch.compile's
reduce-overhead mode captures the step in its own CUDA graphs without skipping.

Skipped, with the reason, without torch (CPU tests) or without CUDA / libmlajit (GPU tests)."""
import gc
import logging
import math
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import which_mlajit  # noqa: E402

which_mlajit.use_source_tree()  # the tree's package, unless MLAJIT_TEST_INSTALLED=1
import mlajit  # noqa: E402
from mlajit import _capi  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover - the CPU machine may not have torch
    torch = None

SEED = int(os.environ.get("MLAJIT_TEST_SEED", "1234"))
SCALE = 1 / math.sqrt(192)


def cpu_skip_reason():
    if torch is None:
        return "torch is not installed (pip install torch to run the custom-op tests)"
    available, why = mlajit.torch_op_available()
    if not available:
        return f"torch.ops.mlajit.run is not registered: {why}"
    return None


class RegistrationWithoutAUsableTorch(unittest.TestCase):
    """import mlajit in a child process whose torch is missing, broken or too old: mlajit imports,
    and says why the op is not registered (a warning when torch is there but unusable). No torch
    needed: the child gets a stand-in torch package first on its path."""

    def import_mlajit(self, torch_init=None):
        with tempfile.TemporaryDirectory() as folder:
            setup = "import sys; sys.modules['torch'] = None\n"  # find_spec: not installed
            if torch_init is not None:
                os.makedirs(os.path.join(folder, "torch"))
                with open(os.path.join(folder, "torch", "__init__.py"), "w") as init:
                    init.write(torch_init)
                setup = ""
            paths = [folder] + ([] if which_mlajit.testing_installed() else [which_mlajit.PYTHON])
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
            code = setup + ("import warnings; warnings.simplefilter('always')\n"
                            "import mlajit; print(repr(mlajit.torch_op_available()))")
            child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                   env=env, cwd=folder, timeout=120)
        self.assertEqual(child.returncode, 0, child.stderr)
        return child.stdout.strip(), child.stderr

    def test_without_torch_mlajit_imports_and_says_so_quietly(self):
        available, warnings = self.import_mlajit()
        self.assertEqual(available, "(False, 'torch is not installed')")
        self.assertNotIn("Warning", warnings)

    def test_a_torch_that_fails_to_import_is_named_in_a_warning(self):
        available, warnings = self.import_mlajit(
            "raise OSError('libcudart.so.12: cannot open shared object file')")
        self.assertEqual(available, "(False, 'OSError: libcudart.so.12: cannot open shared "
                                    "object file')")
        self.assertIn("RuntimeWarning: mlajit: torch is installed, but torch.ops.mlajit.run is "
                      "not registered (OSError: libcudart.so.12", warnings)

    def test_a_torch_without_custom_op_is_named_in_a_warning(self):
        available, warnings = self.import_mlajit("__version__ = '2.3.1'\nclass library: pass\n")
        self.assertIn("torch 2.3.1 has no torch.library.custom_op: the mlajit op needs torch >= 2.4",
                      available)
        self.assertIn("torch 2.3.1 has no torch.library.custom_op", warnings)


class WithStandInLibrary(unittest.TestCase):
    """A BatchMlaAttention over a stand-in library (no driver needed to create one)."""

    def setUp(self):
        reason = cpu_skip_reason()
        if reason:
            self.skipTest(reason)
        from fakes import RecordingLibrary
        self.saved = _capi._library
        _capi._library = RecordingLibrary()
        self.attention = mlajit.BatchMlaAttention(num_heads=16, device=0)

    def tearDown(self):
        _capi._library = self.saved

    def fake_tensors(self, mode, tokens=3, pages=5):
        """The op's tensor arguments as fake CUDA tensors (q split from one [.., 576] tensor, the
        cache one concatenated [pages, 64, 576] tensor, as engines keep them)."""
        with mode:
            q = torch.empty(tokens, 16, 576, dtype=torch.bfloat16, device="cuda")
            cache = torch.empty(pages, 64, 576, dtype=torch.bfloat16, device="cuda")
            return dict(q_nope=q[..., :512], q_pe=q[..., 512:], ckv=cache[..., :512],
                        kpe=cache[..., 512:],
                        kv_indices=torch.empty(7, dtype=torch.int32, device="cuda"),
                        out=torch.empty(tokens, 16, 512, dtype=torch.bfloat16, device="cuda"),
                        lse=torch.empty(tokens, 16, dtype=torch.float32, device="cuda"))


class OpRegistration(WithStandInLibrary):
    def test_the_op_is_registered_and_its_schema_declares_the_mutations(self):
        schema = str(torch.ops.mlajit.run.default._schema)
        self.assertRegex(schema, r"Tensor\(a\d*!\) out")
        self.assertRegex(schema, r"Tensor\(a\d*!\)\? lse")
        self.assertRegex(schema, r"Tensor q_nope, Tensor q_pe, Tensor ckv, Tensor kpe, "
                                 r"Tensor kv_indices")
        self.assertIn("-> ()", schema)
        self.assertIs(mlajit.torch_ops.run._opoverload, torch.ops.mlajit.run.default)

    def test_the_kv_scales_come_as_floats_or_as_tensors(self):
        # A schema has no float-or-tensor type: each scale has a float (a constant to the
        # compiler) and a tensor (read by the kernel at run time), both defaulted.
        schema = str(torch.ops.mlajit.run.default._schema)
        self.assertIn("float kv_scale_ckv=1., float kv_scale_kpe=1., "
                      "Tensor? kv_scale_ckv_tensor=None, Tensor? kv_scale_kpe_tensor=None", schema)

    def test_the_per_token_scales_come_last_and_are_not_written(self):
        # Appended after the existing optional arguments, so that callers written before it
        # (positional or not) keep working; read only, so no alias annotation.
        schema = str(torch.ops.mlajit.run.default._schema)
        self.assertTrue(schema.endswith("Tensor? kv_scale_kpe_tensor=None, "
                                        "Tensor? ckv_scales=None) -> ()"), schema)

    def test_each_object_gets_its_own_handle_and_a_closed_one_is_refused(self):
        from mlajit import _op_handles
        other = mlajit.BatchMlaAttention(num_heads=16, device=0)
        self.assertNotEqual(other.op_handle, self.attention.op_handle)
        self.assertIs(_op_handles.lookup(other.op_handle), other)
        handle = other.op_handle
        other.close()
        refused = rf"no live BatchMlaAttention has op handle {handle}"
        with self.assertRaisesRegex(ValueError, refused):
            _op_handles.lookup(handle)
        with self.assertRaisesRegex(TypeError, r"handle must be the int"):
            _op_handles.lookup(True)
        collected = mlajit.BatchMlaAttention(num_heads=16, device=0)
        handle = collected.op_handle
        del collected  # the registry holds no strong reference: the object goes
        gc.collect()
        refused = rf"no live BatchMlaAttention has op handle {handle}"
        with self.assertRaisesRegex(ValueError, refused):
            _op_handles.lookup(handle)

    def test_the_eager_op_runs_the_object_its_handle_names(self):
        # CPU tensors reach the real implementation (there is no CUDA kernel registration to
        # route them away), which refuses them with the binding's own message.
        q = torch.zeros(3, 16, 512, dtype=torch.bfloat16)
        with self.assertRaisesRegex(ValueError, r"q_nope is on cpu: expected a CUDA tensor"):
            torch.ops.mlajit.run(q, q[..., :64], q, q[..., :64], torch.zeros(1, dtype=torch.int32),
                                 q, None, SCALE, self.attention.op_handle)


class EagerScalesReachTheObject(WithStandInLibrary):
    """The op hands each scale to BatchMlaAttention.run in one argument: the tensor when one is
    given, else the float (a stand-in object records what it gets; no GPU needed, so a tensor
    is seen only as far as its device check, which names the op's argument)."""

    def setUp(self):
        super().setUp()
        from mlajit import _op_handles

        class Recorder:
            shape, device = mlajit.ShapeSpec(num_heads=16, kv_dtype="e4m3"), 0

            def __init__(self):
                self.calls = []

            def run(self, *args, **kwargs):
                self.calls.append(kwargs)

        self.recorder = Recorder()
        self.handle = _op_handles.register(self.recorder)
        self.addCleanup(_op_handles.unregister, self.handle)

    def call(self, **scales):
        q = torch.zeros(3, 16, 512, dtype=torch.bfloat16)
        torch.ops.mlajit.run(q, q[..., :64], q, q[..., :64], torch.zeros(1, dtype=torch.int32), q,
                             None, SCALE, self.handle, **scales)
        return self.recorder.calls[-1]

    def test_floats_tensors_and_defaults(self):
        got = self.call()
        self.assertEqual((got["kv_scale_ckv"], got["kv_scale_kpe"]), (1.0, 1.0))
        got = self.call(kv_scale_ckv=0.5, kv_scale_kpe=0.25)
        self.assertEqual((got["kv_scale_ckv"], got["kv_scale_kpe"]), (0.5, 0.25))
        with self.assertRaisesRegex(ValueError, r"kv_scale_kpe_tensor is a tensor on cpu: "
                                                r"expected a CUDA tensor"):
            self.call(kv_scale_ckv=0.5, kv_scale_kpe_tensor=torch.ones((), dtype=torch.float32))
        self.assertEqual(len(self.recorder.calls), 2)

    def test_ckv_scales_reach_the_object(self):
        self.assertIsNone(self.call()["ckv_scales"])
        scales = torch.ones(5, 64, 4)
        self.assertIs(self.call(ckv_scales=scales)["ckv_scales"], scales)

    def test_a_scale_given_both_ways_is_refused(self):
        with self.assertRaisesRegex(ValueError, r"kv_scale_kpe=0.5 and kv_scale_kpe_tensor are "
                                                r"both given: expected one of them"):
            self.call(kv_scale_kpe=0.5, kv_scale_kpe_tensor=torch.ones(1))


class WithFakeTensors(WithStandInLibrary):
    """The op called in a FakeTensorMode (its fake implementation), on fake_tensors."""

    def setUp(self):
        super().setUp()
        from torch._subclasses.fake_tensor import FakeTensorMode
        self.mode = FakeTensorMode()
        self.tensors = self.fake_tensors(self.mode)
        # FakeTensorMode logs a traceback for every TypeError it passes on (the binding's dtype
        # errors are TypeErrors); the tests below expect them, so the log is kept quiet.
        logger = logging.getLogger("torch._subclasses.fake_tensor")
        self.addCleanup(logger.setLevel, logger.level)
        logger.setLevel(logging.CRITICAL)

    def call(self, handle=None, sm_scale=SCALE, **changes):
        tensors = dict(self.tensors, **changes)
        handle = self.attention.op_handle if handle is None else handle
        with self.mode:
            return torch.ops.mlajit.run(**tensors, sm_scale=sm_scale, handle=handle)


class FakeImplementation(WithFakeTensors):
    def test_good_fake_arguments_pass_and_produce_nothing(self):
        self.assertIsNone(self.call())
        self.assertIsNone(self.call(lse=None))

    def test_bad_arguments_are_refused_at_trace_time_naming_the_argument(self):
        with self.mode:
            wrong_heads = torch.empty(3, 8, 512, dtype=torch.bfloat16, device="cuda")
            f16_cache = torch.empty(5, 64, 512, dtype=torch.float16, device="cuda")
            on_cpu = torch.empty(3, 16, 64, dtype=torch.bfloat16)
            odd_rows = torch.empty(5, 64, 516, dtype=torch.bfloat16, device="cuda")[..., :512]
            lse_f16 = torch.empty(3, 16, dtype=torch.float16, device="cuda")
        with self.assertRaisesRegex(ValueError, r"out has shape \(3, 8, 512\): expected \(3, 16, "):
            self.call(out=wrong_heads)
        with self.assertRaisesRegex(TypeError, r"ckv has dtype float16: expected bfloat16"):
            self.call(ckv=f16_cache)
        with self.assertRaisesRegex(ValueError, r"q_pe is on cpu: expected a CUDA tensor"):
            self.call(q_pe=on_cpu)
        with self.assertRaisesRegex(ValueError, r"ckv has stride 516 in dimension 1"):
            self.call(ckv=odd_rows)
        with self.assertRaisesRegex(TypeError, r"lse has dtype float16: expected float32"):
            self.call(lse=lse_f16)
        with self.assertRaisesRegex(ValueError, r"sm_scale=-1.0: expected a positive float"):
            self.call(sm_scale=-1.0)
        with self.assertRaisesRegex(ValueError, r"no live BatchMlaAttention has op handle 999999"):
            self.call(handle=999999)

    def test_kv_scales_are_checked_at_trace_time(self):
        e4m3 = mlajit.BatchMlaAttention(num_heads=16, device=0, kv_dtype=torch.float8_e4m3fn)
        with self.mode:
            cache = torch.empty(5, 64, 576, dtype=torch.float8_e4m3fn, device="cuda")
            scale = torch.empty((), dtype=torch.float32, device="cuda")
            one = torch.empty(1, dtype=torch.float32, device="cuda")
            two = torch.empty(2, dtype=torch.float32, device="cuda")
            f16 = torch.empty((), dtype=torch.float16, device="cuda")
            on_cpu = torch.empty((), dtype=torch.float32)
        fp8 = dict(ckv=cache[..., :512], kpe=cache[..., 512:], handle=e4m3.op_handle)
        self.assertIsNone(self.call(**fp8, kv_scale_ckv=0.5, kv_scale_kpe=2.0))
        self.assertIsNone(self.call(**fp8, kv_scale_ckv_tensor=scale, kv_scale_kpe_tensor=one))
        with self.assertRaisesRegex(ValueError, r"kv_scale_ckv=0.0: expected a finite float > 0"):
            self.call(**fp8, kv_scale_ckv=0.0)
        with self.assertRaisesRegex(ValueError, r"kv_scale_kpe_tensor has shape \(2,\): expected "
                                                r"one element"):
            self.call(**fp8, kv_scale_kpe_tensor=two)
        with self.assertRaisesRegex(TypeError, r"kv_scale_ckv_tensor has dtype float16: expected "
                                               r"float32"):
            self.call(**fp8, kv_scale_ckv_tensor=f16)
        with self.assertRaisesRegex(ValueError, r"kv_scale_ckv_tensor is a tensor on cpu: expected "
                                                r"a CUDA tensor"):
            self.call(**fp8, kv_scale_ckv_tensor=on_cpu)
        with self.assertRaisesRegex(ValueError, r"kv_scale_ckv=0.5 and kv_scale_ckv_tensor"):
            self.call(**fp8, kv_scale_ckv=0.5, kv_scale_ckv_tensor=scale)
        # The bf16 object of setUp: its cache takes no scale, in either form.
        with self.assertRaisesRegex(ValueError, r"kv_scale_kpe=0.5 scales an e4m3 KV cache, but "
                                                r"this object's KV cache is bfloat16"):
            self.call(kv_scale_kpe=0.5)
        with self.assertRaisesRegex(ValueError, r"kv_scale_ckv_tensor=a tensor scales an e4m3"):
            self.call(kv_scale_ckv_tensor=scale)


class FakeImplementationOfPerTokenScales(WithFakeTensors):
    """An object created with kv_scales='token128' (DeepSeek-V3.2's cache): the fake
    implementation checks ckv_scales and kpe's dtype at trace time."""

    def setUp(self):
        super().setUp()
        self.v32 = mlajit.BatchMlaAttention(num_heads=16, device=0, kv_dtype="e4m3",
                                            kv_scales="token128")
        with self.mode:
            cache = torch.empty(5, 64, 656, dtype=torch.uint8, device="cuda")
            self.views = dict(ckv=cache[..., :512].view(torch.float8_e4m3fn),
                              ckv_scales=cache[..., 512:528].view(torch.float32),
                              kpe=cache[..., 528:].view(torch.bfloat16), handle=self.v32.op_handle)

    def test_the_v32_views_pass(self):
        self.assertEqual(self.views["ckv_scales"].stride(), (64 * 164, 164, 1))
        self.assertIsNone(self.call(**self.views))
        self.assertIsNone(self.call(**self.views, lse=None))

    def test_missing_or_bad_ckv_scales_are_refused_at_trace_time(self):
        with self.mode:
            wrong_blocks = torch.empty(5, 64, 8, dtype=torch.float32, device="cuda")
            bf16 = torch.empty(5, 64, 4, dtype=torch.bfloat16, device="cuda")
            odd_rows = torch.empty(5, 64, 6, dtype=torch.float32, device="cuda")[..., :4]
            on_cpu = torch.empty(5, 64, 4, dtype=torch.float32)
            fp8_kpe = torch.empty(5, 64, 64, dtype=torch.float8_e4m3fn, device="cuda")
        with self.assertRaisesRegex(ValueError, r"ckv_scales is required with "
                                                r"kv_scales='token128'"):
            self.call(**dict(self.views, ckv_scales=None))
        with self.assertRaisesRegex(ValueError, r"ckv_scales has shape \(5, 64, 8\): expected "
                                                r"\(5, 64, 4\)"):
            self.call(**dict(self.views, ckv_scales=wrong_blocks))
        with self.assertRaisesRegex(TypeError, r"ckv_scales has dtype bfloat16: expected float32"):
            self.call(**dict(self.views, ckv_scales=bf16))
        with self.assertRaisesRegex(ValueError, r"ckv_scales has stride 6 in dimension 1"):
            self.call(**dict(self.views, ckv_scales=odd_rows))
        with self.assertRaisesRegex(ValueError, r"ckv_scales is on cpu: expected a CUDA tensor"):
            self.call(**dict(self.views, ckv_scales=on_cpu))
        with self.assertRaisesRegex(TypeError, r"kpe has dtype float8_e4m3fn: expected bfloat16"):
            self.call(**dict(self.views, kpe=fp8_kpe))
        with self.assertRaisesRegex(ValueError, r"kv_scale_ckv=0.5 is a per-tensor scale"):
            self.call(**self.views, kv_scale_ckv=0.5)

    def test_a_per_tensor_object_refuses_ckv_scales_at_trace_time(self):
        with self.assertRaisesRegex(ValueError, r"ckv_scales is given, but this object's KV cache "
                                                r"is not scaled per token"):
            self.call(ckv_scales=self.views["ckv_scales"])


class DynamoTracesAStep(WithStandInLibrary):
    def test_a_model_step_calling_the_op_traces_as_one_graph(self):
        from torch._subclasses.fake_tensor import FakeTensorMode
        handle = self.attention.op_handle

        class Step(torch.nn.Module):
            def forward(self, q, cache, kv_indices):
                out = q.new_empty(q.shape[0], q.shape[1], 512)
                lse = torch.empty(q.shape[0], q.shape[1], dtype=torch.float32, device=q.device)
                torch.ops.mlajit.run(q[..., :512], q[..., 512:], cache[..., :512],
                                     cache[..., 512:], kv_indices, out, lse, SCALE, handle)
                return out.flatten(1), lse

        mode = FakeTensorMode(allow_non_fake_inputs=True)
        t = self.fake_tensors(mode)
        with mode:
            q = torch.empty(3, 16, 576, dtype=torch.bfloat16, device="cuda")
            cache = torch.empty(5, 64, 576, dtype=torch.bfloat16, device="cuda")
            # strict: Dynamo, which fails on a graph break as torch.compile(fullgraph=True) does
            exported = torch.export.export(Step(), (q, cache, t["kv_indices"]), strict=True)
        calls = [node for node in exported.graph.nodes
                 if node.op == "call_function" and "mlajit" in str(node.target)]
        self.assertEqual(len(calls), 1, exported.graph)
        self.assertEqual(calls[0].args[-2:], (SCALE, handle))  # the scalars, as traced constants

    def test_a_step_with_device_scales_traces_them_as_tensor_inputs(self):
        # The scales as tensors are graph inputs, not constants: a captured graph reads whatever
        # the tensors hold at replay, and a new value needs no new trace.
        from torch._subclasses.fake_tensor import FakeTensorMode
        e4m3 = mlajit.BatchMlaAttention(num_heads=16, device=0, kv_dtype="e4m3")
        handle = e4m3.op_handle

        class Step(torch.nn.Module):
            def forward(self, q, cache, kv_indices, ckv_scale, kpe_scale):
                out = q.new_empty(q.shape[0], q.shape[1], 512)
                torch.ops.mlajit.run(q[..., :512], q[..., 512:], cache[..., :512],
                                     cache[..., 512:], kv_indices, out, None, SCALE, handle,
                                     kv_scale_ckv_tensor=ckv_scale, kv_scale_kpe_tensor=kpe_scale)
                return out

        with FakeTensorMode(allow_non_fake_inputs=True):
            inputs = (torch.empty(3, 16, 576, dtype=torch.bfloat16, device="cuda"),
                      torch.empty(5, 64, 576, dtype=torch.float8_e4m3fn, device="cuda"),
                      torch.empty(7, dtype=torch.int32, device="cuda"),
                      torch.empty((), dtype=torch.float32, device="cuda"),
                      torch.empty(1, dtype=torch.float32, device="cuda"))
            exported = torch.export.export(Step(), inputs, strict=True)
        calls = [node for node in exported.graph.nodes
                 if node.op == "call_function" and "mlajit" in str(node.target)]
        self.assertEqual(len(calls), 1, exported.graph)
        placeholders = [node for node in exported.graph.nodes if node.op == "placeholder"]
        # positional in the graph: ..., sm_scale, handle, the two floats, the two tensors
        self.assertEqual(calls[0].args[-6:-2], (SCALE, handle, 1.0, 1.0))
        self.assertEqual(calls[0].args[-2:], tuple(placeholders[3:5]))

    def test_a_step_over_one_v32_cache_buffer_traces_its_views(self):
        # DeepSeek-V3.2: the step takes the uint8 [pages, 64, 656] cache and views it as e4m3
        # codes, float32 per-token scales and bf16 kpe; ckv_scales is a tensor input of the op.
        from torch._subclasses.fake_tensor import FakeTensorMode
        v32 = mlajit.BatchMlaAttention(num_heads=16, device=0, kv_dtype="e4m3",
                                       kv_scales="token128")
        handle = v32.op_handle

        class Step(torch.nn.Module):
            def forward(self, q, cache, kv_indices):
                out = q.new_empty(q.shape[0], q.shape[1], 512)
                torch.ops.mlajit.run(q[..., :512], q[..., 512:],
                                     cache[..., :512].view(torch.float8_e4m3fn),
                                     cache[..., 528:].view(torch.bfloat16), kv_indices, out, None,
                                     SCALE, handle,
                                     ckv_scales=cache[..., 512:528].view(torch.float32))
                return out

        with FakeTensorMode(allow_non_fake_inputs=True):
            inputs = (torch.empty(3, 16, 576, dtype=torch.bfloat16, device="cuda"),
                      torch.empty(5, 64, 656, dtype=torch.uint8, device="cuda"),
                      torch.empty(7, dtype=torch.int32, device="cuda"))
            exported = torch.export.export(Step(), inputs, strict=True)
        calls = [node for node in exported.graph.nodes
                 if node.op == "call_function" and "mlajit" in str(node.target)]
        self.assertEqual(len(calls), 1, exported.graph)
        scales = calls[0].kwargs.get("ckv_scales", calls[0].args[-1])
        self.assertIsInstance(scales, torch.fx.Node)  # a traced view of the cache, not None


# ---------------------------------------------------------------------------------------------
# GPU


def gpu_skip_reason():
    reason = cpu_skip_reason()
    if reason:
        return reason
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    try:
        _capi.library()
    except OSError as error:
        return f"libmlajit.so not found: {error}"
    return None


class CompiledStepOnTheGpu(unittest.TestCase):
    HEADS = 128

    def setUp(self):
        reason = gpu_skip_reason()
        if reason:
            self.skipTest(reason)
        from test_mla_torch import make_problem, reference
        self.make_problem, self.reference = make_problem, reference
        self.generator = torch.Generator().manual_seed(SEED)
        torch._dynamo.reset()
        print(f"seed {SEED} (set MLAJIT_TEST_SEED to repeat)")

    def problem(self, kv_lens, num_pages=64):
        """A decode batch with the queries as one [tokens, heads, 576] tensor and the cache as one
        [pages, 64, 576] tensor, the layouts engines keep; p["q"], p["cache"] hold them."""
        p = self.make_problem(kv_lens, [1] * len(kv_lens), self.HEADS, 512, 64, 64,
                              torch.bfloat16, self.generator, num_pages=num_pages,
                              concatenated=True)
        p["q"] = torch.cat([p["q_nope"], p["q_pe"]], dim=-1)
        p["cache"] = p["ckv"]._base if p["ckv"]._base is not None else p["ckv"]
        self.assertEqual(tuple(p["cache"].shape[-1:]), (576,))
        return p

    def step_returning(self, handle):
        def step(q, cache, kv_indices):
            out = q.new_empty(q.shape[0], q.shape[1], 512)
            lse = torch.empty(q.shape[0], q.shape[1], dtype=torch.float32, device=q.device)
            torch.ops.mlajit.run(q[..., :512], q[..., 512:], cache[..., :512], cache[..., 512:],
                                 kv_indices, out, lse, SCALE, handle)
            return out, lse
        return step

    def step_into(self, handle):
        def step(q, cache, kv_indices, out, lse):
            torch.ops.mlajit.run(q[..., :512], q[..., 512:], cache[..., :512], cache[..., 512:],
                                 kv_indices, out, lse, SCALE, handle)
        return step

    def eager_run(self, attention, p):
        """BatchMlaAttention.run on the same inputs (no op, no compiler)."""
        out = torch.empty(p["q"].shape[0], self.HEADS, 512, dtype=torch.bfloat16, device="cuda")
        lse = torch.empty(p["q"].shape[0], self.HEADS, dtype=torch.float32, device="cuda")
        attention.run(p["q"][..., :512], p["q"][..., 512:], p["cache"][..., :512],
                      p["cache"][..., 512:], p["kv_indices"], SCALE, out=out, lse=lse)
        return out, lse

    def assert_same_bits(self, got, want, what):
        for name, a, b in zip(("out", "lse"), got, want):
            torch.cuda.synchronize()
            if not torch.equal(a, b):
                diff = (a.double() - b.double()).abs().max().item()
                self.fail(f"{what}: {name} differs from the eager run's, max abs diff {diff:.3e} "
                          f"(seed {SEED})")

    def assert_near_reference(self, got, p, what):
        want_out, want_lse = self.reference(p, SCALE, causal=False)
        for name, a, b, tolerance in (("out", got[0], want_out, 2e-2),
                                      ("lse", got[1], want_lse, 1e-2)):
            error = (a.double() - b.double()).abs().max().item()
            self.assertLess(error, tolerance, f"{what}: {name} max abs error {error:.3e} against "
                                              f"the float64 reference (seed {SEED})")

    def test_a_compiled_step_gives_the_eager_bits(self):
        attention = mlajit.BatchMlaAttention(num_heads=self.HEADS)
        p = self.problem([700, 33, 2048, 5, 1, 1500], num_pages=None)
        attention.plan(p["qo_indptr"], p["kv_indptr"], p["kv_len"])
        eager = self.eager_run(attention, p)
        step = self.step_returning(attention.op_handle)
        self.assert_same_bits(step(p["q"], p["cache"], p["kv_indices"]), eager, "eager op")
        compiled = torch.compile(step, fullgraph=True)
        got = compiled(p["q"], p["cache"], p["kv_indices"])
        self.assert_same_bits(got, eager, "torch.compile(fullgraph=True)")
        self.assert_near_reference(got, p, "torch.compile(fullgraph=True)")

    def test_a_compiled_step_writes_into_the_tensors_it_was_given(self):
        attention = mlajit.BatchMlaAttention(num_heads=self.HEADS)
        p = self.problem([100, 1999, 64], num_pages=None)
        attention.plan(p["qo_indptr"], p["kv_indptr"], p["kv_len"])
        eager = self.eager_run(attention, p)
        out = torch.full_like(eager[0], float("nan"))
        lse = torch.full_like(eager[1], float("nan"))
        compiled = torch.compile(self.step_into(attention.op_handle), fullgraph=True)
        compiled(p["q"], p["cache"], p["kv_indices"], out, lse)
        self.assert_same_bits((out, lse), eager, "compiled step writing into its arguments")

    def graph_attention(self):
        """Graph-safe across re-plans: a pinned grid and a reserved workspace."""
        return mlajit.BatchMlaAttention(num_heads=self.HEADS, cluster_size=1,
                                        workspace_bytes=64 << 20)

    def test_a_captured_graph_of_the_compiled_step_replays_after_a_replan(self):
        attention = self.graph_attention()
        first = self.problem([700, 33, 2048, 5])
        second = self.problem([100, 1500, 64, 999])
        static = dict(q=first["q"].clone(), cache=first["cache"].clone(),
                      kv_indices=torch.zeros(64, dtype=torch.int32, device="cuda"))
        out = torch.empty(4, self.HEADS, 512, dtype=torch.bfloat16, device="cuda")
        lse = torch.empty(4, self.HEADS, dtype=torch.float32, device="cuda")
        compiled = torch.compile(self.step_into(attention.op_handle), fullgraph=True)
        attention.plan(first["qo_indptr"], first["kv_indptr"], first["kv_len"])
        for _ in range(2):  # compile and warm up outside the capture
            compiled(**static, out=out, lse=lse)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            compiled(**static, out=out, lse=lse)
        for p in (first, second):
            if p is second:  # a new batch of the same token count: re-plan, replay the graph
                attention.plan(p["qo_indptr"], p["kv_indptr"], p["kv_len"])
            static["q"].copy_(p["q"])
            static["cache"].copy_(p["cache"])
            static["kv_indices"].zero_()
            static["kv_indices"][:len(p["kv_indices"])] = p["kv_indices"]
            out.fill_(float("nan"))
            lse.fill_(float("nan"))
            graph.replay()
            what = "graph replay" + (" after a re-plan" if p is second else "")
            self.assert_same_bits((out, lse), self.eager_run(attention, dict(p, **static)), what)
            self.assert_near_reference((out, lse), p, what)

    def test_reduce_overhead_mode_captures_the_step_and_follows_replans(self):
        from torch._dynamo.utils import counters
        attention = self.graph_attention()
        first = self.problem([700, 33, 2048, 5])
        second = self.problem([100, 1500, 64, 999])
        compiled = torch.compile(self.step_returning(attention.op_handle), mode="reduce-overhead",
                                 fullgraph=True)
        counters.clear()
        for p in (first, second):
            attention.plan(p["qo_indptr"], p["kv_indptr"], p["kv_len"])
            # kv_indices in a fixed-size buffer, as an engine keeps it: one shape, one graph
            kv_indices = torch.zeros(64, dtype=torch.int32, device="cuda")
            kv_indices[:len(p["kv_indices"])] = p["kv_indices"]
            for _ in range(3):  # warm-up, record, replay: the last call replays the graph
                torch.compiler.cudagraph_mark_step_begin()  # a new step: earlier outputs may go
                got = compiled(p["q"], p["cache"], kv_indices)
            got = tuple(t.clone() for t in got)  # the next replay reuses the graph's outputs
            what = "reduce-overhead" + (" after a re-plan" if p is second else "")
            self.assert_same_bits(got, self.eager_run(attention, p), what)
        self.assertEqual(dict(counters["inductor"]).get("cudagraph_skips", 0), 0,
                         f"torch.compile skipped CUDA graphs: {dict(counters['inductor'])}")


if __name__ == "__main__":
    unittest.main()
