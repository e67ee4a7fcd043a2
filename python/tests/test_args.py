"""Argument checks of the Python binding, without a GPU and without torch: fake device arrays
through __cuda_array_interface__. Also the C ABI's no-driver error when libmlajit is found.
Runs under pytest or `python3 -m unittest` (from python/tests)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import which_mlajit  # noqa: E402

which_mlajit.use_source_tree()  # the tree's package and build unless MLAJIT_TEST_INSTALLED=1
import ctypes  # noqa: E402
import re  # noqa: E402
import types  # noqa: E402

import mlajit  # noqa: E402
from mlajit import _capi, _streams  # noqa: E402
from fakes import BF16, F32, I32, FakeDtype, FakeTorchTensor, RecordingLibrary  # noqa: E402


class FakeDeviceArray:
    """Just the interface: a device address, shape, typestr and (optional) byte strides."""

    def __init__(self, shape, typestr="<f2", ptr=0x10000, strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "strides": strides, "version": 3}


def f16_shape(**changes):
    fields = dict(num_heads=16, head_dim_ckv=512, head_dim_kpe=64, page_size=64, dtype="float16")
    fields.update(changes)
    return mlajit.ShapeSpec(**fields)


def good_tensors(tokens=3, pages=5):
    return dict(q_nope=FakeDeviceArray((tokens, 16, 512)), q_pe=FakeDeviceArray((tokens, 16, 64)),
                ckv=FakeDeviceArray((pages, 64, 512)), kpe=FakeDeviceArray((pages, 64, 64)),
                kv_indices=FakeDeviceArray((7,), "<i4"), out=FakeDeviceArray((tokens, 16, 512)))


class RunArgumentChecks(unittest.TestCase):
    def make(self, **changes):
        tensors = good_tensors()
        tensors.update(changes)
        return mlajit.make_run_args(f16_shape(), None, sm_scale=0.07, **tensors)

    def test_good_arguments_give_element_strides(self):
        args = self.make()
        self.assertEqual(args.struct_size, __import__("ctypes").sizeof(_capi.RunArgs))
        self.assertEqual((args.q_nope_stride_token, args.q_nope_stride_head), (16 * 512, 512))
        self.assertEqual((args.ckv_stride_page, args.ckv_stride_token), (64 * 512, 512))
        self.assertEqual(args.num_tokens, 3)
        self.assertAlmostEqual(args.sm_scale, 0.07, places=6)

    def test_a_concatenated_cache_is_accepted_through_strides(self):
        # one [pages][64][576] f16 cache: ckv = [..., :512], kpe = [..., 512:]
        base, row = 0x20000, 576 * 2
        ckv = FakeDeviceArray((5, 64, 512), ptr=base, strides=(64 * row, row, 2))
        kpe = FakeDeviceArray((5, 64, 64), ptr=base + 1024, strides=(64 * row, row, 2))
        args = self.make(ckv=ckv, kpe=kpe)
        self.assertEqual((args.ckv_stride_page, args.ckv_stride_token), (64 * 576, 576))
        self.assertEqual(args.kpe, base + 1024)

    def test_not_a_tensor_is_a_type_error_naming_the_argument(self):
        with self.assertRaisesRegex(TypeError, r"q_pe must be a CUDA tensor.*got list"):
            self.make(q_pe=[1, 2, 3])

    def test_wrong_dtype_is_a_type_error(self):
        with self.assertRaisesRegex(TypeError, r"ckv has dtype float32: expected float16"):
            self.make(ckv=FakeDeviceArray((5, 64, 512), "<f4"))
        with self.assertRaisesRegex(TypeError, r"kv_indices has dtype float16: expected int32"):
            self.make(kv_indices=FakeDeviceArray((7,)))
        with self.assertRaisesRegex(TypeError, r"typestr '<i8'"):
            self.make(kv_indices=FakeDeviceArray((7,), "<i8"))

    def test_wrong_shapes_are_value_errors(self):
        with self.assertRaisesRegex(ValueError, r"q_nope has shape \(3, 16, 500\): expected \(\*, 16, 512\)"):
            self.make(q_nope=FakeDeviceArray((3, 16, 500)))
        with self.assertRaisesRegex(ValueError, r"q_pe has shape \(4, 16, 64\): expected \(3, 16, 64\)"):
            self.make(q_pe=FakeDeviceArray((4, 16, 64)))
        with self.assertRaisesRegex(ValueError, r"kpe has shape \(6, 64, 64\): expected \(5, 64, 64\)"):
            self.make(kpe=FakeDeviceArray((6, 64, 64)))
        with self.assertRaisesRegex(ValueError, r"ckv has shape \(5, 32, 512\)"):
            self.make(ckv=FakeDeviceArray((5, 32, 512)))  # page size 32, shape says 64
        with self.assertRaisesRegex(ValueError, r"out has shape"):
            self.make(out=FakeDeviceArray((3, 16)))

    def test_strides_the_kernel_cannot_use_are_value_errors(self):
        with self.assertRaisesRegex(ValueError, r"q_nope must be contiguous in its last dimension"):
            self.make(q_nope=FakeDeviceArray((3, 16, 512), strides=(16 * 1024 * 2, 1024 * 2, 4)))
        with self.assertRaisesRegex(ValueError, r"ckv has stride 516 in dimension 1"):
            self.make(ckv=FakeDeviceArray((5, 64, 512), strides=(64 * 516 * 2, 516 * 2, 2)))
        with self.assertRaisesRegex(ValueError, r"out starts at 0x10008, not 16-byte aligned"):
            self.make(out=FakeDeviceArray((3, 16, 512), ptr=0x10008))

    def test_lse_must_be_dense_float32(self):
        self.make(lse=FakeDeviceArray((3, 16), "<f4"))
        with self.assertRaisesRegex(TypeError, r"lse has dtype float16: expected float32"):
            self.make(lse=FakeDeviceArray((3, 16)))
        with self.assertRaisesRegex(ValueError, r"lse has shape \(3, 8\)"):
            self.make(lse=FakeDeviceArray((3, 8), "<f4"))

    def test_sm_scale_is_required_and_positive(self):
        tensors = good_tensors()
        for bad in (None, 0.0, -1.0, "0.1"):
            with self.assertRaisesRegex(ValueError, r"sm_scale="):
                mlajit.make_run_args(f16_shape(), None, sm_scale=bad, **tensors)

    def test_unknown_dtype_of_the_shape_is_a_type_error(self):
        with self.assertRaisesRegex(TypeError, r"dtype 'int8' is not supported"):
            f16_shape(dtype="int8")
        with self.assertRaisesRegex(TypeError, r"kv_dtype 'fp8' is not supported"):
            f16_shape(kv_dtype="fp8")

    def test_the_kv_cache_is_checked_against_its_own_dtype(self):
        shape = f16_shape(kv_dtype="e4m3")
        self.assertEqual(shape.to_c().kv_dtype, _capi.FLOAT8_E4M3)
        self.assertEqual(f16_shape().to_c().kv_dtype, _capi.KV_DTYPE_SAME)
        e4m3 = FakeDtype("float8_e4m3fn")
        tensors = torch_tensors()
        tensors["q_nope"] = FakeTorchTensor((3, 16, 512), FakeDtype("float16"))
        tensors["q_pe"] = FakeTorchTensor((3, 16, 64), FakeDtype("float16"), ptr=0x7f0000100000)
        tensors["out"] = FakeTorchTensor((3, 16, 512), FakeDtype("float16"), ptr=0x7f0000600000)
        with self.assertRaisesRegex(TypeError, r"ckv has dtype bfloat16: expected float8_e4m3fn"):
            mlajit.make_run_args(shape, 0, sm_scale=0.07, **tensors)
        # One byte per element: a row stride must be a multiple of 16 elements, not 8.
        tensors["ckv"] = FakeTorchTensor((5, 64, 512), e4m3, ptr=0x7f0000200000,
                                         strides=(64 * 520, 520, 1))
        tensors["kpe"] = FakeTorchTensor((5, 64, 64), e4m3, ptr=0x7f0000400000)
        with self.assertRaisesRegex(ValueError, r"ckv has stride 520 .* multiple of 16 elements"):
            mlajit.make_run_args(shape, 0, sm_scale=0.07, **tensors)
        tensors["ckv"] = FakeTorchTensor((5, 64, 512), e4m3, ptr=0x7f0000200000)
        args = mlajit.make_run_args(shape, 0, sm_scale=0.07, **tensors)
        self.assertEqual((args.ckv_stride_page, args.ckv_stride_token), (64 * 512, 512))

    def test_the_kernel_family_must_be_a_name(self):
        saved = _capi._library
        _capi._library = RecordingLibrary()
        try:
            with self.assertRaisesRegex(TypeError, r"kernel must be a kernel family name"):
                mlajit.BatchMlaAttention(num_heads=16, device=0, kernel=None)
        finally:
            _capi._library = saved


class MergeArgumentChecks(unittest.TestCase):
    """mlajit.make_merge_args: the checks merge_states runs before the library is called."""

    def parts(self, n=2, tokens=3):
        outs = [FakeDeviceArray((tokens, 16, 512), ptr=0x10000 * (i + 1)) for i in range(n)]
        lses = [FakeDeviceArray((tokens, 16), "<f4", ptr=0x900000 + 0x1000 * i) for i in range(n)]
        return outs, lses

    def make(self, outs=None, lses=None, out=None, lse="default", lse_base="2"):
        default_outs, default_lses = self.parts()
        outs = default_outs if outs is None else outs
        lses = default_lses if lses is None else lses
        out = FakeDeviceArray((3, 16, 512), ptr=0x800000) if out is None else out
        lse = FakeDeviceArray((3, 16), "<f4", ptr=0xa00000) if lse == "default" else lse
        return mlajit.make_merge_args(outs, lses, out, lse, lse_base)

    def test_good_arguments_fill_every_part(self):
        args, parts = self.make(lse_base="e")
        self.assertEqual(args.num_parts, 2)
        self.assertEqual((args.num_tokens, args.num_heads, args.head_dim), (3, 16, 512))
        self.assertEqual((args.out_stride_token, args.out_stride_head), (16 * 512, 512))
        self.assertEqual(args.dtype, _capi.FLOAT16)
        self.assertEqual(args.lse_base, _capi.LSE_NATURAL)
        self.assertEqual(args.device, -1)
        self.assertEqual([p.out for p in parts], [0x10000, 0x20000])
        self.assertEqual(args.parts[1].lse, 0x901000)
        args, _ = self.make(lse=None)
        self.assertIsNone(args.lse)  # not written

    def test_counts_must_match_and_stay_within_64(self):
        outs, lses = self.parts(3)
        with self.assertRaisesRegex(ValueError, r"3 outputs and 2 LSEs"):
            self.make(outs, lses[:2])
        with self.assertRaisesRegex(ValueError, r"0 parts: expected 1 to 64"):
            self.make([], [])
        outs, lses = self.parts(65)
        with self.assertRaisesRegex(ValueError, r"65 parts"):
            self.make(outs, lses)
        with self.assertRaisesRegex(TypeError, r"outs must be a list of tensors"):
            self.make(outs=FakeDeviceArray((3, 16, 512)))

    def test_parts_must_agree_in_shape_and_dtype(self):
        outs, lses = self.parts()
        outs[1] = FakeDeviceArray((3, 8, 512), ptr=0x20000)
        with self.assertRaisesRegex(ValueError, r"outs\[1\] has shape \(3, 8, 512\): expected \(3, 16, 512\)"):
            self.make(outs, lses)
        outs, lses = self.parts()
        outs[0] = FakeDeviceArray((3, 16, 512), "<f4", ptr=0x10000)
        with self.assertRaisesRegex(TypeError, r"outs\[0\] has dtype float32: expected bfloat16 or float16"):
            self.make(outs, lses)
        with self.assertRaisesRegex(ValueError, r"out has shape \(2, 16, 512\)"):
            self.make(out=FakeDeviceArray((2, 16, 512), ptr=0x800000))
        outs = [FakeDeviceArray((3, 16, 20), ptr=0x10000 * (i + 1)) for i in range(2)]
        with self.assertRaisesRegex(ValueError, r"dim 20: expected a multiple of 8"):
            self.make(outs, lses)

    def test_lses_must_be_dense_float32(self):
        outs, lses = self.parts()
        lses[1] = FakeDeviceArray((3, 16), "<f2", ptr=0x901000)
        with self.assertRaisesRegex(TypeError, r"lses\[1\] has dtype float16: expected float32"):
            self.make(outs, lses)
        outs, lses = self.parts()
        lses[0] = FakeDeviceArray((3, 16), "<f4", ptr=0x900000, strides=(128, 4))
        with self.assertRaisesRegex(ValueError, r"lses\[0\] must be dense"):
            self.make(outs, lses)
        with self.assertRaisesRegex(ValueError, r"lse has shape \(3, 15\)"):
            self.make(lse=FakeDeviceArray((3, 15), "<f4", ptr=0xa00000))

    def test_misaligned_rows_and_a_bad_base_are_refused(self):
        outs, lses = self.parts()
        outs[1] = FakeDeviceArray((3, 16, 512), ptr=0x20008)
        with self.assertRaisesRegex(ValueError, r"outs\[1\] starts at 0x20008, not 16-byte aligned"):
            self.make(outs, lses)
        with self.assertRaisesRegex(ValueError, r"lse_base='10'"):
            self.make(lse_base="10")

    def test_out_is_required_without_torch_tensors(self):
        outs, lses = self.parts()
        with self.assertRaisesRegex(TypeError, r"out is required"):
            mlajit.merge_states(outs[0], lses[0], outs[1], lses[1])


class HostIntegerChecks(unittest.TestCase):
    """ctypes wraps ints that do not fit the C field: 2**32 + 100 would plan 100 tokens."""

    def test_plan_arrays_refuse_values_past_int32_naming_the_index(self):
        from mlajit.attention import _int32_array
        with self.assertRaisesRegex(ValueError, r"kv_len\[1\] is 4294967396: expected an int32"):
            _int32_array("kv_len", [5, 2**32 + 100])
        with self.assertRaisesRegex(ValueError, r"qo_indptr\[0\] is -2147483649"):
            _int32_array("qo_indptr", [-2**31 - 1, 0])
        array, n = _int32_array("kv_len", [0, 2**31 - 1, -2**31])
        self.assertEqual((list(array), n), ([0, 2**31 - 1, -2**31], 3))

    def test_plan_arrays_refuse_non_integers(self):
        from mlajit.attention import _int32_array
        with self.assertRaisesRegex(TypeError, r"kv_len\[0\] must be an integer, got 1.5"):
            _int32_array("kv_len", [1.5])
        with self.assertRaisesRegex(TypeError, r"kv_len\[0\] must be an integer, got True"):
            _int32_array("kv_len", [True])

    def test_shape_fields_past_int32_are_refused(self):
        with self.assertRaisesRegex(ValueError, r"num_heads is 4294967312"):
            f16_shape(num_heads=2**32 + 16)
        with self.assertRaisesRegex(TypeError, r"page_size must be an integer"):
            f16_shape(page_size="64")


def fields(args):
    return {name: getattr(args, name) for name, _ in _capi.RunArgs._fields_}


class RunArgsPacking(unittest.TestCase):
    def test_the_one_call_pack_writes_every_field_where_the_c_struct_has_it(self):
        values = ([ctypes.sizeof(_capi.RunArgs)] + [(i + 1) * 16 for i in range(18)] + [0.25] +
                  [0, 0.5, 2.0, 0x7f0000000004, 0x7f0000000008] + [0x7f0000000210, 164 * 64, 164])
        args = _capi.RunArgs()
        _capi.RUN_ARGS_PACK.pack_into(args, 0, *values)
        self.assertEqual(list(fields(args).values()), values)

    def test_the_scales_start_past_the_older_layout(self):
        # The 0.1 struct was 160 bytes (sm_scale at 152, then padding, now `reserved`): the
        # scales appended in 0.2.0 start past every byte an older program's struct_size covers.
        self.assertEqual(_capi.RunArgs.sm_scale.offset, 152)
        self.assertEqual(_capi.RunArgs.reserved.offset, 156)
        self.assertEqual(_capi.RunArgs.kv_scale_ckv.offset, 160)
        self.assertEqual(_capi.RunArgs.kv_scale_kpe.offset, 164)
        self.assertEqual(_capi.RunArgs.kv_scale_ckv_device.offset, 168)
        self.assertEqual(_capi.RunArgs.kv_scale_kpe_device.offset, 176)

    def test_the_per_token_scales_are_appended_past_the_first_0_2_layout(self):
        # 0.2.0's first struct ended with kv_scale_kpe_device (184 bytes): ckv_scales and its
        # strides start past every byte a program built against it covers.
        self.assertEqual(_capi.RunArgs.ckv_scales.offset, 184)
        self.assertEqual(_capi.RunArgs.ckv_scales_stride_page.offset, 192)
        self.assertEqual(_capi.RunArgs.ckv_scales_stride_token.offset, 200)
        self.assertEqual(ctypes.sizeof(_capi.RunArgs), 208)

    def test_the_shape_names_its_tail_padding_and_appends_kv_scales(self):
        # The 0.2.0 shape was 40 bytes (kv_dtype at 32, then padding, now `reserved`).
        self.assertEqual(_capi.Shape.kv_dtype.offset, 32)
        self.assertEqual(_capi.Shape.reserved.offset, 36)
        self.assertEqual(_capi.Shape.kv_scales.offset, 40)
        self.assertEqual(ctypes.sizeof(_capi.Shape), 48)


def torch_tensors(tokens=3, pages=5, base=0x7f0000000000):
    return dict(q_nope=FakeTorchTensor((tokens, 16, 512), ptr=base),
                q_pe=FakeTorchTensor((tokens, 16, 64), ptr=base + 0x100000),
                ckv=FakeTorchTensor((pages, 64, 512), ptr=base + 0x200000),
                kpe=FakeTorchTensor((pages, 64, 64), ptr=base + 0x400000),
                kv_indices=FakeTorchTensor((7,), FakeDtype("int32"), ptr=base + 0x500000),
                out=FakeTorchTensor((tokens, 16, 512), ptr=base + 0x600000))


E4M3 = FakeDtype("float8_e4m3fn")


def e4m3_tensors(base=0x7f0000000000):
    tensors = torch_tensors(base=base)
    tensors["ckv"] = FakeTorchTensor((5, 64, 512), E4M3, ptr=base + 0x200000)
    tensors["kpe"] = FakeTorchTensor((5, 64, 64), E4M3, ptr=base + 0x400000)
    return tensors


def scale_tensor(shape=(), dtype=F32, ptr=0x7f0000700000, device=0):
    return FakeTorchTensor(shape, dtype, ptr=ptr, device=device)


class KvScaleArguments(unittest.TestCase):
    """kv_scale_ckv / kv_scale_kpe of an e4m3 KV cache: a float, or a one-element float32 CUDA
    tensor passed as the device pointer the kernel reads at run time."""

    def make(self, shape=None, tensors=None, **scales):
        shape = shape or mlajit.ShapeSpec(num_heads=16, kv_dtype="float8_e4m3fn")
        return mlajit.make_run_args(shape, 0, sm_scale=0.07, **(tensors or e4m3_tensors()),
                                    **scales)

    def test_the_defaults_are_unscaled(self):
        args = self.make()
        self.assertEqual((args.kv_scale_ckv, args.kv_scale_kpe), (1.0, 1.0))
        self.assertFalse(args.kv_scale_ckv_device)
        self.assertFalse(args.kv_scale_kpe_device)
        args = mlajit.make_run_args(mlajit.ShapeSpec(num_heads=16), 0, sm_scale=0.07,
                                    **torch_tensors())  # a bf16 cache
        self.assertEqual((args.kv_scale_ckv, args.kv_scale_kpe), (1.0, 1.0))

    def test_floats_reach_the_float_fields(self):
        args = self.make(kv_scale_ckv=0.0125, kv_scale_kpe=3)
        self.assertAlmostEqual(args.kv_scale_ckv, 0.0125, places=7)
        self.assertEqual(args.kv_scale_kpe, 3.0)
        self.assertFalse(args.kv_scale_ckv_device)
        self.assertFalse(args.kv_scale_kpe_device)

    def test_a_one_element_float32_tensor_is_passed_as_its_address(self):
        for shape in ((), (1,), (1, 1)):
            args = self.make(kv_scale_ckv=scale_tensor(shape),
                             kv_scale_kpe=scale_tensor(shape, ptr=0x7f0000700004))
            self.assertEqual((args.kv_scale_ckv, args.kv_scale_kpe), (1.0, 1.0))
            self.assertEqual(args.kv_scale_ckv_device, 0x7f0000700000)
            self.assertEqual(args.kv_scale_kpe_device, 0x7f0000700004)
        # __cuda_array_interface__ arrays too; one scale a tensor, the other a float
        args = self.make(kv_scale_ckv=FakeDeviceArray((1,), "<f4", ptr=0x30000), kv_scale_kpe=0.5)
        self.assertEqual((args.kv_scale_ckv_device, args.kv_scale_kpe), (0x30000, 0.5))

    def test_a_bad_float_is_a_value_error_naming_the_argument_and_value(self):
        for bad in (0.0, -1.0, float("nan"), float("inf"), 1e39, 1e-50):  # the last two: float32
            with self.assertRaisesRegex(ValueError, re.escape(f"kv_scale_kpe={bad!r}: expected a "
                                                              f"finite float > 0 (as a float32)")):
                self.make(kv_scale_kpe=bad)

    def test_neither_a_float_nor_a_tensor_is_a_type_error(self):
        for bad, got in ((None, "None"), ("0.5", "'0.5'"), (True, "True"), ([0.5], "list")):
            with self.assertRaisesRegex(TypeError, rf"kv_scale_ckv must be a float or a one-element "
                                                   rf"float32 CUDA tensor, got {got}"):
                self.make(kv_scale_ckv=bad)

    def test_a_tensor_of_the_wrong_dtype_size_device_or_alignment_is_refused(self):
        with self.assertRaisesRegex(TypeError, r"kv_scale_ckv has dtype bfloat16: expected float32"):
            self.make(kv_scale_ckv=scale_tensor(dtype=BF16))
        with self.assertRaisesRegex(ValueError, r"kv_scale_kpe has shape \(2,\): expected one "
                                                r"element, shape \(\) or \(1,\)"):
            self.make(kv_scale_kpe=scale_tensor((2,)))
        with self.assertRaisesRegex(ValueError, r"kv_scale_kpe has shape \(0,\)"):
            self.make(kv_scale_kpe=scale_tensor((0,)))
        with self.assertRaisesRegex(ValueError, r"kv_scale_ckv is a tensor on cpu: expected a CUDA "
                                                r"tensor .*pass a float for a host value"):
            self.make(kv_scale_ckv=scale_tensor(device=-1))
        with self.assertRaisesRegex(ValueError, r"kv_scale_ckv is on cuda:1: expected cuda:0"):
            self.make(kv_scale_ckv=scale_tensor(device=1))
        with self.assertRaisesRegex(ValueError, r"kv_scale_ckv starts at 0x7f0000700002, not "
                                                r"4-byte aligned"):
            self.make(kv_scale_ckv=scale_tensor(ptr=0x7f0000700002))
        with self.assertRaisesRegex(TypeError, r"kv_scale_kpe has dtype float16: expected float32"):
            self.make(kv_scale_kpe=FakeDeviceArray((1,), "<f2"))

    def test_a_16_bit_cache_takes_no_scale(self):
        bf16 = mlajit.ShapeSpec(num_heads=16)
        with self.assertRaisesRegex(ValueError, r"kv_scale_ckv=0.5 scales an e4m3 KV cache, but "
                                                r"this object's KV cache is bfloat16"):
            self.make(bf16, torch_tensors(), kv_scale_ckv=0.5)
        with self.assertRaisesRegex(ValueError, r"kv_scale_kpe=a tensor scales an e4m3 KV cache"):
            self.make(bf16, torch_tensors(), kv_scale_kpe=scale_tensor())
        self.make(bf16, torch_tensors(), kv_scale_ckv=1.0, kv_scale_kpe=1)


class KvScalesThroughRun(unittest.TestCase):
    """BatchMlaAttention.run passes the scales on both paths: the full checks and the repeated
    call that reuses them."""

    def setUp(self):
        self.saved = _capi._library
        _capi._library = self.library = RecordingLibrary()
        self.attention = mlajit.BatchMlaAttention(num_heads=16, device=0, kv_dtype="e4m3")

    def tearDown(self):
        _capi._library = self.saved

    def run_and_record(self, **scales):
        self.attention.run(sm_scale=0.07, stream=0x5000, **e4m3_tensors(), **scales)
        return self.library.runs[-1][1]

    def test_every_call_carries_its_own_scales(self):
        device_scale = scale_tensor(ptr=0x7f0000700010)
        for scales in ({}, dict(kv_scale_ckv=0.25, kv_scale_kpe=0.125),
                       dict(kv_scale_ckv=device_scale), dict(kv_scale_kpe=device_scale), {}):
            got = fields(self.run_and_record(**scales))
            want = fields(mlajit.make_run_args(self.attention.shape, 0, sm_scale=0.07,
                                               **e4m3_tensors(), **scales))
            self.assertEqual(got, want, scales)
        self.assertEqual(got["kv_scale_ckv"], 1.0)
        self.assertFalse(got["kv_scale_kpe_device"])
        self.assertEqual(len(self.library.runs), 5)

    def test_a_bad_scale_on_a_repeated_call_is_refused_before_the_library(self):
        self.run_and_record()
        with self.assertRaisesRegex(ValueError, r"kv_scale_ckv=-2.0"):
            self.run_and_record(kv_scale_ckv=-2.0)
        with self.assertRaisesRegex(TypeError, r"kv_scale_kpe has dtype int32"):
            self.run_and_record(kv_scale_kpe=scale_tensor(dtype=I32))
        self.assertEqual(len(self.library.runs), 1)

    def test_the_scales_are_keyword_only(self):
        with self.assertRaises(TypeError):
            self.attention.run(*e4m3_tensors().values(), 0.07, None, None, 0x5000, 0.5)


V32_ROW = 656  # DeepSeek-V3.2's token row: 512 e4m3 codes, 4 float32 scales, 64 bf16 kpe values


def v32_tensors(tokens=3, pages=5, base=0x7f0000000000, cache=0x7f0000800000):
    """bf16 queries and the three views into one uint8 [pages, 64, 656] cache at `cache`, as
    torch gives them: ckv = cache[..., :512] (e4m3), ckv_scales = cache[..., 512:528] (float32),
    kpe = cache[..., 528:] (bf16); strides in each view's elements."""
    tensors = torch_tensors(tokens, pages, base)
    tensors["ckv"] = FakeTorchTensor((pages, 64, 512), E4M3, ptr=cache,
                                     strides=(64 * V32_ROW, V32_ROW, 1))
    tensors["ckv_scales"] = FakeTorchTensor((pages, 64, 4), F32, ptr=cache + 512,
                                            strides=(64 * V32_ROW // 4, V32_ROW // 4, 1))
    tensors["kpe"] = FakeTorchTensor((pages, 64, 64), BF16, ptr=cache + 528,
                                     strides=(64 * V32_ROW // 2, V32_ROW // 2, 1))
    return tensors


def v32_shape(**changes):
    fields = dict(num_heads=16, kv_dtype="float8_e4m3fn", kv_scales="token128")
    fields.update(changes)
    return mlajit.ShapeSpec(**fields)


class PerTokenScales(unittest.TestCase):
    """kv_scales="token128", DeepSeek-V3.2's cache: e4m3 ckv with a float32 scale per 128 values
    of each token (ckv_scales), kpe in the shape's dtype; the per-tensor scales stay unset."""

    def make(self, shape=None, **changes):
        tensors = dict(v32_tensors(), **changes)
        return mlajit.make_run_args(shape or v32_shape(), 0, sm_scale=0.07, **tensors)

    def test_the_shape_names_its_scaling_and_the_dtype_of_kpe(self):
        self.assertEqual(v32_shape().to_c().kv_scales, _capi.KV_SCALES_PER_TOKEN_128)
        self.assertEqual(v32_shape().kpe_dtype, "bfloat16")
        self.assertEqual(v32_shape(dtype="float16").kpe_dtype, "float16")
        per_tensor = mlajit.ShapeSpec(num_heads=16, kv_dtype="e4m3")
        self.assertEqual(per_tensor.kv_scales, "tensor")
        self.assertEqual(per_tensor.to_c().kv_scales, _capi.KV_SCALES_PER_TENSOR)
        self.assertEqual(per_tensor.kpe_dtype, "float8_e4m3fn")
        self.assertEqual(mlajit.ShapeSpec(kv_scales="tensor").kpe_dtype, "bfloat16")

    def test_an_unknown_kv_scales_is_a_value_error_naming_the_choices(self):
        for bad in ("token", "per_token", "TENSOR", 1, None):
            with self.assertRaisesRegex(ValueError, re.escape(f"kv_scales={bad!r}: expected one "
                                                              f"of 'tensor', 'token128'")):
                v32_shape(kv_scales=bad)

    def test_token128_needs_an_e4m3_cache(self):
        for kv_dtype in (None, "bfloat16", "float16"):
            with self.assertRaisesRegex(ValueError, r"kv_scales='token128' scales an e4m3 KV cache "
                                                    r"per token, but this shape's KV cache is "
                                                    r"(bfloat16|float16): expected "
                                                    r"kv_dtype='float8_e4m3fn'"):
                v32_shape(kv_dtype=kv_dtype)

    def test_the_v32_row_views_give_the_documented_fields(self):
        args = self.make()
        base = 0x7f0000800000
        self.assertEqual(args.ckv, base)
        self.assertEqual((args.ckv_stride_page, args.ckv_stride_token), (64 * 656, 656))
        self.assertEqual(args.ckv_scales, base + 512)
        self.assertEqual((args.ckv_scales_stride_page, args.ckv_scales_stride_token),
                         (64 * 164, 164))
        self.assertEqual(args.kpe, base + 528)
        self.assertEqual((args.kpe_stride_page, args.kpe_stride_token), (64 * 328, 328))
        self.assertEqual((args.kv_scale_ckv, args.kv_scale_kpe), (1.0, 1.0))
        self.assertFalse(args.kv_scale_ckv_device)
        self.assertFalse(args.kv_scale_kpe_device)
        self.assertEqual(args.num_tokens, 3)

    def test_separate_tensors_and_array_interface_scales_are_accepted(self):
        args = self.make(ckv=FakeTorchTensor((5, 64, 512), E4M3, ptr=0x7f0000900000),
                         kpe=FakeTorchTensor((5, 64, 64), BF16, ptr=0x7f0000a00000),
                         ckv_scales=FakeTorchTensor((5, 64, 4), F32, ptr=0x7f0000b00000))
        self.assertEqual((args.ckv_scales, args.ckv_scales_stride_page,
                          args.ckv_scales_stride_token), (0x7f0000b00000, 256, 4))
        args = self.make(ckv_scales=FakeDeviceArray((5, 64, 4), "<f4", ptr=0x40010,
                                                    strides=(64 * 656, 656, 4)))
        self.assertEqual((args.ckv_scales, args.ckv_scales_stride_page,
                          args.ckv_scales_stride_token), (0x40010, 64 * 164, 164))

    def test_ckv_scales_are_required_under_token128(self):
        tensors = v32_tensors()
        del tensors["ckv_scales"]
        with self.assertRaisesRegex(ValueError, re.escape(
                "ckv_scales is required with kv_scales='token128': a float32 CUDA tensor "
                "[pages, page_size, head_dim_ckv // 128] = [5, 64, 4]")):
            mlajit.make_run_args(v32_shape(), 0, sm_scale=0.07, **tensors)
        with self.assertRaisesRegex(ValueError, r"ckv_scales is required"):
            self.make(ckv_scales=None)

    def test_ckv_scales_are_refused_under_per_tensor_scales(self):
        scales = v32_tensors()["ckv_scales"]
        refused = (r"ckv_scales is given, but this object's KV cache is not scaled per token: "
                   r"ckv_scales needs an object created with kv_scales='token128'")
        with self.assertRaisesRegex(ValueError, refused):
            mlajit.make_run_args(mlajit.ShapeSpec(num_heads=16, kv_dtype="e4m3"), 0,
                                 sm_scale=0.07, **e4m3_tensors(), ckv_scales=scales)
        with self.assertRaisesRegex(ValueError, refused):
            mlajit.make_run_args(mlajit.ShapeSpec(num_heads=16), 0, sm_scale=0.07,
                                 **torch_tensors(), ckv_scales=scales)

    def test_ckv_scales_of_the_wrong_kind_dtype_shape_or_device_are_refused(self):
        with self.assertRaisesRegex(TypeError, r"ckv_scales must be a CUDA tensor .*got list"):
            self.make(ckv_scales=[1.0] * 4)
        with self.assertRaisesRegex(TypeError, r"ckv_scales has dtype bfloat16: expected float32"):
            self.make(ckv_scales=FakeTorchTensor((5, 64, 4), BF16, ptr=0x7f0000b00000))
        with self.assertRaisesRegex(TypeError, r"ckv_scales has dtype float16: expected float32"):
            self.make(ckv_scales=FakeDeviceArray((5, 64, 4), "<f2", ptr=0x40000))
        for shape in ((5, 64, 8), (6, 64, 4), (5, 32, 4), (5, 64), (5, 64, 4, 1)):
            expected = re.escape(f"ckv_scales has shape {shape}: expected (5, 64, 4)")
            with self.assertRaisesRegex(ValueError, expected):
                self.make(ckv_scales=FakeTorchTensor(shape, F32, ptr=0x7f0000b00000))
        with self.assertRaisesRegex(ValueError, r"ckv_scales is on cpu: expected a CUDA tensor"):
            self.make(ckv_scales=FakeTorchTensor((5, 64, 4), F32, device=-1))
        with self.assertRaisesRegex(ValueError, r"ckv_scales is on cuda:1: expected cuda:0"):
            self.make(ckv_scales=FakeTorchTensor((5, 64, 4), F32, ptr=0x7f0000b00000, device=1))

    def test_ckv_scales_strides_and_alignment_the_kernel_cannot_use_are_refused(self):
        def scales(ptr=0x7f0000800200, strides=(64 * 164, 164, 1)):
            return FakeTorchTensor((5, 64, 4), F32, ptr=ptr, strides=strides)

        with self.assertRaisesRegex(ValueError, r"ckv_scales must be contiguous in its last "
                                                r"dimension: its stride there is 2"):
            self.make(ckv_scales=scales(strides=(64 * 164, 164, 2)))
        with self.assertRaisesRegex(ValueError, r"ckv_scales has stride 162 in dimension 1 "
                                                r"\(page, token\): expected a multiple of 4 "
                                                r"elements \(16 bytes\)"):
            self.make(ckv_scales=scales(strides=(64 * 164, 162, 1)))
        with self.assertRaisesRegex(ValueError, r"ckv_scales has stride 10498 in dimension 0"):
            self.make(ckv_scales=scales(strides=(64 * 164 + 2, 164, 1)))
        with self.assertRaisesRegex(ValueError, r"ckv_scales starts at 0x7f0000800204, not "
                                                r"16-byte aligned"):
            self.make(ckv_scales=scales(ptr=0x7f0000800204))

    def test_kpe_is_of_the_shapes_dtype(self):
        with self.assertRaisesRegex(TypeError, r"kpe has dtype float8_e4m3fn: expected bfloat16"):
            self.make(kpe=FakeTorchTensor((5, 64, 64), E4M3, ptr=0x7f0000a00000))
        with self.assertRaisesRegex(TypeError, r"ckv has dtype bfloat16: expected float8_e4m3fn"):
            self.make(ckv=FakeTorchTensor((5, 64, 512), BF16, ptr=0x7f0000a00000))

    def test_the_per_tensor_scales_stay_unset(self):
        self.make(kv_scale_ckv=1.0, kv_scale_kpe=1)  # the defaults, spelled out
        with self.assertRaisesRegex(ValueError, r"kv_scale_ckv=0.5 is a per-tensor scale, but this "
                                                r"object's KV cache is scaled per token "
                                                r"\(kv_scales='token128'\): its ckv_scales "
                                                r"replace the per-tensor scales"):
            self.make(kv_scale_ckv=0.5)
        with self.assertRaisesRegex(ValueError, r"kv_scale_kpe=2 is a per-tensor scale"):
            self.make(kv_scale_kpe=2)
        with self.assertRaisesRegex(ValueError, r"kv_scale_ckv=a tensor is a per-tensor scale"):
            self.make(kv_scale_ckv=scale_tensor())


class PerTokenScalesThroughRun(unittest.TestCase):
    """BatchMlaAttention(kv_scales="token128").run on both paths: the full checks, and the
    repeated call that reuses them (which must carry each call's ckv_scales pointer)."""

    def setUp(self):
        self.saved = _capi._library
        _capi._library = self.library = RecordingLibrary()
        self.shapes = []
        create = self.library.mlajit_attention_create

        def recording_create(shape, options, out):
            self.shapes.append(ctypes.cast(shape, ctypes.POINTER(_capi.Shape))[0].kv_scales)
            return create(shape, options, out)
        self.library.mlajit_attention_create = recording_create
        self.attention = mlajit.BatchMlaAttention(num_heads=16, device=0, kv_dtype="e4m3",
                                                  kv_scales="token128")

    def tearDown(self):
        _capi._library = self.saved

    def run_and_record(self, tensors=None, **changes):
        tensors = dict(tensors or v32_tensors(), **changes)
        self.attention.run(sm_scale=0.07, stream=0x5000, **tensors)
        return self.library.runs[-1][1]

    def test_the_object_is_created_with_per_token_scales(self):
        self.assertEqual(self.shapes, [_capi.KV_SCALES_PER_TOKEN_128])
        mlajit.BatchMlaAttention(num_heads=16, device=0, kv_dtype="e4m3")
        self.assertEqual(self.shapes[-1], _capi.KV_SCALES_PER_TENSOR)
        with self.assertRaisesRegex(ValueError, r"kv_scales='token': expected one of"):
            mlajit.BatchMlaAttention(num_heads=16, device=0, kv_dtype="e4m3", kv_scales="token")
        with self.assertRaisesRegex(ValueError, r"kv_scales='token128' scales an e4m3 KV cache"):
            mlajit.BatchMlaAttention(num_heads=16, device=0, kv_scales="token128")
        self.assertEqual(len(self.shapes), 2)  # the refused ones never reached the library

    def test_repeated_runs_carry_each_calls_ckv_scales(self):
        for cache in (0x7f0000800000, 0x7f0000800000, 0x7e0000400000, 0x7d0000000000):
            tensors = v32_tensors(cache=cache)
            got = fields(self.run_and_record(tensors))
            want = fields(mlajit.make_run_args(self.attention.shape, 0, sm_scale=0.07, **tensors))
            self.assertEqual(got, want)
            self.assertEqual(got["ckv_scales"], cache + 512)
            self.assertEqual(got["ckv_scales_stride_token"], 164)
        self.assertEqual(len(self.library.runs), 4)

    def test_a_later_run_without_or_with_bad_ckv_scales_is_refused_before_the_library(self):
        self.run_and_record()
        with self.assertRaisesRegex(ValueError, r"ckv_scales is required"):
            self.run_and_record(ckv_scales=None)
        with self.assertRaisesRegex(ValueError, r"ckv_scales starts at 0x7f0000800208, not "
                                                r"16-byte aligned"):
            self.run_and_record(ckv_scales=FakeTorchTensor((5, 64, 4), F32, ptr=0x7f0000800208,
                                                           strides=(64 * 164, 164, 1)))
        with self.assertRaisesRegex(ValueError, r"ckv_scales has stride 166 in dimension 1"):
            self.run_and_record(ckv_scales=FakeTorchTensor((5, 64, 4), F32, ptr=0x7f0000800200,
                                                           strides=(64 * 166, 166, 1)))
        with self.assertRaisesRegex(ValueError, r"kv_scale_ckv=0.5 is a per-tensor scale"):
            self.run_and_record(kv_scale_ckv=0.5)
        self.assertEqual(len(self.library.runs), 1)

    def test_a_per_tensor_object_refuses_ckv_scales_on_a_later_run(self):
        bf16 = mlajit.BatchMlaAttention(num_heads=16, device=0)
        bf16.run(sm_scale=0.07, stream=0x5000, **torch_tensors())
        self.assertFalse(fields(self.library.runs[-1][1])["ckv_scales"])
        with self.assertRaisesRegex(ValueError, r"ckv_scales is given"):
            bf16.run(sm_scale=0.07, stream=0x5000, **torch_tensors(),
                     ckv_scales=v32_tensors()["ckv_scales"])
        self.assertEqual(len(self.library.runs), 1)

    def test_ckv_scales_is_keyword_only(self):
        t = v32_tensors()
        with self.assertRaisesRegex(TypeError, r"positional argument"):
            self.attention.run(t["q_nope"], t["q_pe"], t["ckv"], t["kpe"], t["kv_indices"], 0.07,
                               t["out"], None, 0x5000, t["ckv_scales"])


class OptionsSeenByCreate(unittest.TestCase):
    """Records the fields `seen_fields` of each mlajit_options that create receives."""
    seen_fields = ()

    def setUp(self):
        self.saved = _capi._library
        _capi._library = self.library = RecordingLibrary()
        self.seen = []
        create = self.library.mlajit_attention_create

        def recording_create(shape, options, out):
            o = ctypes.cast(options, ctypes.POINTER(_capi.Options))[0]
            values = tuple(getattr(o, name) for name in self.seen_fields)
            self.seen.append(values[0] if len(values) == 1 else values)
            return create(shape, options, out)
        self.library.mlajit_attention_create = recording_create

    def tearDown(self):
        _capi._library = self.saved


class CompileModeOption(OptionsSeenByCreate):
    """compile_mode reaches mlajit_options.compile_mode (appended in 0.2.0) by name."""
    seen_fields = ("compile_mode",)

    def test_each_mode_name_gives_its_c_value(self):
        for name, value in (("default", 0), ("auto", 1), ("process", 2), ("inline", 3)):
            mlajit.BatchMlaAttention(num_heads=16, device=0, compile_mode=name)
            self.assertEqual(self.seen[-1], value, name)
        mlajit.BatchMlaAttention(num_heads=16, device=0)
        self.assertEqual(self.seen[-1], 0)

    def test_an_unknown_mode_is_a_value_error_naming_the_choices(self):
        for bad in ("fork", 2, None):
            with self.assertRaises(ValueError) as caught:
                mlajit.BatchMlaAttention(num_heads=16, device=0, compile_mode=bad)
            self.assertIn("'process'", str(caught.exception))

    def test_the_struct_keeps_the_older_layout_and_appends(self):
        # The 0.1.1 struct was 48 bytes; kernel (a pointer) and compile_mode start past every
        # byte an older program's struct_size covers, and `reserved` names the tail padding.
        self.assertEqual(_capi.Options.kernel.offset, 48)
        self.assertEqual(_capi.Options.compile_mode.offset, 56)
        self.assertEqual(_capi.Options.reserved.offset, 60)
        # batch_invariant and invariant_chunk_tokens come after the padding a 64-byte struct had.
        self.assertEqual(_capi.Options.batch_invariant.offset, 64)
        self.assertEqual(_capi.Options.invariant_chunk_tokens.offset, 68)
        self.assertEqual(ctypes.sizeof(_capi.Options), 72)


class BatchInvariantOption(OptionsSeenByCreate):
    """batch_invariant and invariant_chunk_tokens reach mlajit_options (appended in 0.2.0)."""
    seen_fields = ("batch_invariant", "invariant_chunk_tokens")

    def test_off_by_default_and_on_when_asked(self):
        mlajit.BatchMlaAttention(num_heads=16, device=0)
        self.assertEqual(self.seen[-1], (0, 0))
        mlajit.BatchMlaAttention(num_heads=16, device=0, batch_invariant=True,
                                 invariant_chunk_tokens=1024)
        self.assertEqual(self.seen[-1], (1, 1024))

    def test_a_chunk_length_that_is_no_int32_is_refused_naming_it(self):
        with self.assertRaisesRegex((TypeError, ValueError), "invariant_chunk_tokens"):
            mlajit.BatchMlaAttention(num_heads=16, device=0, batch_invariant=True,
                                     invariant_chunk_tokens=2 ** 40)


class RepeatedRunsOfTorchTensors(unittest.TestCase):
    """run() skips re-checking tensors whose type, device, dtype, shape and strides passed last
    time; these tests change one of those on a later call and expect the full checks' error."""

    def setUp(self):
        self.saved = _capi._library
        _capi._library = self.library = RecordingLibrary()
        self.attention = mlajit.BatchMlaAttention(num_heads=16, device=0)
        self.tensors = torch_tensors()

    def tearDown(self):
        _capi._library = self.saved

    def run_and_record(self, **changes):
        tensors = dict(self.tensors, **changes)
        sm_scale = tensors.pop("sm_scale", 0.07)
        self.attention.run(sm_scale=sm_scale, stream=0x5000, **tensors)  # no torch stream lookup
        handle, args, stream = self.library.runs[-1]
        self.assertEqual((handle, stream), (0x1234, 0x5000))
        return args

    def expected(self, **changes):
        tensors = dict(self.tensors, **changes)
        sm_scale = tensors.pop("sm_scale", 0.07)
        return fields(mlajit.make_run_args(self.attention.shape, 0, sm_scale=sm_scale, **tensors))

    def test_repeated_runs_pass_what_the_full_checks_build(self):
        for _ in range(3):
            self.assertEqual(fields(self.run_and_record()), self.expected())
        moved = torch_tensors(base=0x7e0000000000)  # new pointers, same layout: the cached path
        lse = FakeTorchTensor((3, 16), F32, ptr=0x7d0000000000)
        for changes in (moved, dict(moved, lse=lse, sm_scale=0.5), moved, dict(sm_scale=2)):
            self.assertEqual(fields(self.run_and_record(**changes)), self.expected(**changes))

    def test_a_tensor_changed_in_place_between_runs_is_checked_again(self):
        self.run_and_record()
        q_nope = self.tensors["q_nope"]
        q_nope._strides = (16 * 1024, 1024, 2)
        with self.assertRaisesRegex(ValueError, r"q_nope must be contiguous in its last dimension"):
            self.run_and_record()
        q_nope._strides = (16 * 512, 512, 1)
        ckv = self.tensors["ckv"]
        ckv._strides = (64 * 516, 516, 1)
        with self.assertRaisesRegex(ValueError, r"ckv has stride 516 in dimension 1"):
            self.run_and_record()
        ckv._strides = (64 * 512, 512, 1)
        self.tensors["kpe"]._shape = (6, 64, 64)
        with self.assertRaisesRegex(ValueError, r"kpe has shape \(6, 64, 64\): expected \(5, 64, 64\)"):
            self.run_and_record()
        self.tensors["kpe"]._shape = (5, 64, 64)
        self.tensors["kv_indices"].dtype = FakeDtype("int64")
        with self.assertRaisesRegex(TypeError, r"kv_indices has dtype int64: expected int32"):
            self.run_and_record()
        self.tensors["kv_indices"].dtype = FakeDtype("int32")
        self.assertEqual(fields(self.run_and_record()), self.expected())

    def test_another_device_or_the_host_is_refused_on_a_later_run(self):
        self.run_and_record()
        with self.assertRaisesRegex(ValueError, r"q_pe is on cpu: expected a CUDA tensor"):
            self.run_and_record(q_pe=FakeTorchTensor((3, 16, 64), device=-1))
        with self.assertRaisesRegex(ValueError, r"out is on cuda:1: expected cuda:0"):
            self.run_and_record(out=FakeTorchTensor((3, 16, 512), device=1))

    def test_a_misaligned_pointer_or_a_bad_scale_is_refused_on_a_later_run(self):
        self.run_and_record()
        with self.assertRaisesRegex(ValueError, r"out starts at 0x7f0000000008, not 16-byte aligned"):
            self.run_and_record(out=FakeTorchTensor((3, 16, 512), ptr=0x7f0000000008))
        for bad in (None, 0.0, -1.0, float("nan"), "0.1"):
            with self.assertRaisesRegex(ValueError, r"sm_scale="):
                self.run_and_record(sm_scale=bad)
        self.assertEqual(len(self.library.runs), 1)

    def test_a_different_token_count_gets_its_own_checks(self):
        self.run_and_record()
        with self.assertRaisesRegex(ValueError, r"q_pe has shape \(3, 16, 64\): expected \(4, 16, 64\)"):
            self.run_and_record(q_nope=FakeTorchTensor((4, 16, 512)), out=FakeTorchTensor((4, 16, 512)))
        four = torch_tensors(tokens=4)
        self.assertEqual(fields(self.run_and_record(**four))["num_tokens"], 4)

    def test_a_failing_run_raises_the_library_error(self):
        self.library.status = 1
        for _ in range(2):  # the first run checks everything, the second takes the cached path
            with self.assertRaises(mlajit.MlajitError) as caught:
                self.run_and_record()
            self.assertEqual(caught.exception.code, "INVALID_ARGUMENT")

    def test_run_after_close_passes_a_null_handle(self):
        self.run_and_record()
        self.attention.close()
        self.attention.run(sm_scale=0.07, stream=0x5000, **self.tensors)
        self.assertIsNone(self.library.runs[-1][0])


class StreamLookup(unittest.TestCase):
    def fake_torch(self, raw_result, public_result=0xabc):
        calls = []

        def current_stream(device):
            calls.append(("public", device))
            return types.SimpleNamespace(cuda_stream=public_result)

        def raw(device):
            calls.append(("raw", device))
            return raw_result

        torch = types.SimpleNamespace(cuda=types.SimpleNamespace(current_stream=current_stream),
                                      _C=types.SimpleNamespace(_cuda_getCurrentRawStream=raw))
        return torch, calls

    def test_the_raw_stream_is_used_once_it_agreed_with_torch_cuda_current_stream(self):
        torch, calls = self.fake_torch(0xabc)
        getter = _streams.current_stream_getter(torch, 2)
        self.assertEqual(getter(), 0xabc)
        self.assertEqual(calls, [("public", 2), ("raw", 2), ("raw", 2)])

    def test_a_disagreeing_or_missing_raw_stream_keeps_the_public_path(self):
        torch, calls = self.fake_torch(0xdef)
        self.assertEqual(_streams.current_stream_getter(torch, 0)(), 0xabc)
        self.assertEqual(calls[-1], ("public", 0))
        del torch._C._cuda_getCurrentRawStream
        self.assertEqual(_streams.current_stream_getter(torch, 0)(), 0xabc)

    def test_no_device_means_the_current_device_at_each_call(self):
        torch, calls = self.fake_torch(0xabc)
        self.assertEqual(_streams.current_stream_getter(torch, None)(), 0xabc)
        self.assertEqual(calls, [("public", None)])


def library_or_skip(test):
    if os.environ.get("MLAJIT_LIBRARY"):
        return _capi.library()  # a library named explicitly that fails to load is a failure
    try:
        return _capi.library()
    except OSError as error:
        test.skipTest(f"libmlajit.so not found (set MLAJIT_LIBRARY): {error}")


class ThroughTheLibrary(unittest.TestCase):
    def test_version_is_the_header_version(self):
        library_or_skip(self)
        header = os.path.join(os.path.dirname(__file__), "..", "..", "include", "mlajit", "version.h")
        with open(header) as text:
            self.assertIn(f'"{mlajit.version()}"', text.read())

    def test_the_run_args_mirror_the_library_struct_and_its_defaults(self):
        library = library_or_skip(self)
        init = library["mlajit_run_args_init_sized"]
        init.restype, init.argtypes = ctypes.c_int, [ctypes.POINTER(_capi.RunArgs), ctypes.c_size_t]
        args = _capi.RunArgs()
        self.assertEqual(init(ctypes.byref(args), ctypes.sizeof(_capi.RunArgs)), 0)
        self.assertEqual(args.struct_size, ctypes.sizeof(_capi.RunArgs))  # the C sizeof
        self.assertEqual((args.kv_scale_ckv, args.kv_scale_kpe), (1.0, 1.0))
        self.assertIsNone(args.kv_scale_ckv_device)
        self.assertIsNone(args.kv_scale_kpe_device)
        self.assertIsNone(args.ckv_scales)
        self.assertEqual((args.ckv_scales_stride_page, args.ckv_scales_stride_token), (0, 0))

    def test_the_shape_mirrors_the_library_struct_and_its_defaults(self):
        library = library_or_skip(self)
        shape = _capi.Shape()
        self.assertEqual(library.mlajit_shape_init_sized(ctypes.byref(shape),
                                                         ctypes.sizeof(_capi.Shape)), 0)
        self.assertEqual(shape.struct_size, ctypes.sizeof(_capi.Shape))  # the C sizeof
        self.assertEqual(shape.kv_dtype, _capi.KV_DTYPE_SAME)
        self.assertEqual(shape.kv_scales, _capi.KV_SCALES_PER_TENSOR)

    def test_an_invalid_shape_is_an_mlajit_error_with_a_message(self):
        library_or_skip(self)
        with self.assertRaises(mlajit.MlajitError) as caught:
            mlajit.BatchMlaAttention(num_heads=0, device=0)
        self.assertEqual(caught.exception.code, "INVALID_ARGUMENT")
        self.assertIn("num_heads=0", str(caught.exception))
        with self.assertRaises(mlajit.MlajitError) as caught:
            mlajit.BatchMlaAttention(head_dim_ckv=384, device=0)
        self.assertEqual(caught.exception.code, "UNSUPPORTED")

    def test_without_a_driver_creating_says_why(self):
        library_or_skip(self)
        available, why = mlajit.driver_available()
        if available:
            self.skipTest("a CUDA driver is present")
        self.assertTrue(why)
        with self.assertRaises(mlajit.MlajitError) as caught:
            mlajit.BatchMlaAttention(device=0)
        self.assertEqual(caught.exception.code, "NO_DRIVER")
        self.assertIn("libcuda", str(caught.exception))

    def test_an_unknown_kernel_family_is_refused_listing_the_known_ones(self):
        library_or_skip(self)
        with self.assertRaises(mlajit.MlajitError) as caught:
            mlajit.BatchMlaAttention(device=0, kernel="hoppr")
        self.assertEqual(caught.exception.code, "INVALID_ARGUMENT")
        self.assertIn("'hoppr'", str(caught.exception))
        self.assertIn("auto, hopper, portable", str(caught.exception))

    def test_a_family_that_cannot_serve_the_shape_says_why(self):
        library_or_skip(self)
        with self.assertRaises(mlajit.MlajitError) as caught:
            mlajit.BatchMlaAttention(device=0, kernel="hopper", head_dim_ckv=256, head_dim_kpe=32)
        self.assertEqual(caught.exception.code, "UNSUPPORTED")
        self.assertIn("ckv=512 kpe=64 only", str(caught.exception))
        with self.assertRaises(mlajit.MlajitError) as caught:
            mlajit.BatchMlaAttention(device=0, dtype="e4m3")
        self.assertEqual(caught.exception.code, "UNSUPPORTED")
        self.assertIn("dtype=e4m3", str(caught.exception))

    def test_kernel_families_are_listed(self):
        library_or_skip(self)
        families = mlajit.kernel_families()
        self.assertEqual([f["name"] for f in families], ["hopper", "portable"])
        self.assertEqual(families[0]["head_dims"], ["512/64"])
        self.assertEqual(families[0]["archs"], ["sm_90"])
        self.assertEqual(families[1]["head_dims"], ["512/64", "256/32"])
        self.assertIn("sm_90", families[1]["archs"])
        self.assertTrue(families[1]["summary"])

    def test_tile_for_arch_needs_no_gpu(self):
        library_or_skip(self)
        self.assertEqual(mlajit.tile_for_arch("sm_90")["family"], "hopper")
        tile = mlajit.tile_for_arch("sm_90", num_heads=8)  # auto: portable below 16 heads
        self.assertEqual(tile["family"], "portable")
        self.assertIn(tile["tier"], (1, 2, 3))
        self.assertIn("arch=sm_90", tile["spec_text"])
        with self.assertRaises(mlajit.MlajitError) as caught:
            mlajit.tile_for_arch("sm_12")
        self.assertEqual(caught.exception.code, "INVALID_ARGUMENT")
        # A bare number names the profile's arch, and the spec text says so.
        self.assertEqual(mlajit.tile_for_arch("90", num_heads=8)["spec_text"], tile["spec_text"])

    def test_cache_stats_name_the_layers(self):
        library_or_skip(self)
        stats = mlajit.cache_stats()
        shipped = [d for d in os.environ.get("MLAJIT_CACHE_PATH", "").split(":") if d]
        self.assertEqual(stats["read_only_dirs"], shipped)
        self.assertIsInstance(stats["user_dir"], str)
        self.assertIn(stats["no_jit"], (0, 1))


class InstalledPackage(unittest.TestCase):
    """With MLAJIT_TEST_INSTALLED=1 (after pip install .; the CI's wheel stage): the package and
    its library are the installed ones, found without any environment variable."""

    def setUp(self):
        if not which_mlajit.testing_installed():
            self.skipTest("testing the source tree (MLAJIT_TEST_INSTALLED=1 tests the installed "
                          "package)")
        self.package = os.path.dirname(os.path.realpath(mlajit.__file__))

    def test_the_package_is_not_the_source_tree(self):
        tree_package = os.path.realpath(os.path.join(which_mlajit.PYTHON, "mlajit"))
        self.assertNotEqual(self.package, tree_package)
        self.assertNotIn(os.path.realpath(which_mlajit.ROOT), self.package)

    def test_the_library_inside_the_package_loads_without_mlajit_library(self):
        self.assertIsNone(os.environ.get("MLAJIT_LIBRARY"),
                          "MLAJIT_LIBRARY is set: the installed package's own library is not tested")
        self.assertEqual(os.path.realpath(_capi.library()._name),
                         os.path.join(self.package, "libmlajit.so"))

    def test_the_distribution_version_is_the_library_version(self):
        import importlib.metadata
        self.assertEqual(importlib.metadata.version("mlajit"), mlajit.version())


if __name__ == "__main__":
    unittest.main()
