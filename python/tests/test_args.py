"""Argument checks of the Python binding, without a GPU and without torch: fake device arrays
through __cuda_array_interface__. Also the C ABI's no-driver error when libmlajit is found.
Runs under pytest or `python3 -m unittest` (from python/tests)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import mlajit  # noqa: E402
from mlajit import _capi  # noqa: E402


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


def library_or_skip(test):
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

    def test_tile_for_arch_needs_no_gpu(self):
        library_or_skip(self)
        tile = mlajit.tile_for_arch("sm_90")
        self.assertIn(tile["tier"], (1, 2, 3))
        self.assertIn("arch=sm_90", tile["spec_text"])
        with self.assertRaises(mlajit.MlajitError) as caught:
            mlajit.tile_for_arch("sm_12")
        self.assertEqual(caught.exception.code, "INVALID_ARGUMENT")


if __name__ == "__main__":
    unittest.main()
