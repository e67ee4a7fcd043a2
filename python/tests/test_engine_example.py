"""examples/engine_decode on a GPU, at small sizes: a decode loop over a concatenated paged cache
with one CUDA graph replayed after a plan() per step, mixing q_len 1 and speculative q_len 2-4
requests, each step checked against the example's float32 torch reference (its main() returns 1
when a step is off). Skipped (with the reason) without torch, CUDA or libmlajit (set
MLAJIT_LIBRARY)."""
import importlib.util
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import which_mlajit  # noqa: E402

which_mlajit.use_source_tree()  # the tree's package, unless MLAJIT_TEST_INSTALLED=1
from test_mla_torch import skip_reason  # noqa: E402  (the same needs: torch, CUDA, the library)

EXAMPLE = os.path.join(which_mlajit.ROOT, "examples", "engine_decode", "engine_decode.py")
SEED = int(os.environ.get("MLAJIT_TEST_SEED", "1234"))


def load_example():
    spec = importlib.util.spec_from_file_location("engine_decode", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Small enough for a few seconds once the kernels are in the cache: 128 heads (DeepSeek's), up
# to 8 requests of prompts up to 300 tokens, 4 steps so that requests finish and join.
SMALL = ["--steps", "4", "--max-batch", "8", "--max-prompt", "300"]


class EngineDecodeExample(unittest.TestCase):
    def test_the_example_parses_its_arguments_without_a_gpu(self):
        example = load_example()  # imports without torch too
        args = example.parse_args(SMALL + ["--kv-dtype", "e4m3"])
        self.assertEqual((args.steps, args.max_batch, args.kv_dtype), (4, 8, "e4m3"))

    def run_example(self, *extra):
        reason = skip_reason()
        if reason:
            self.skipTest(reason)
        print(f"seed {SEED} (set MLAJIT_TEST_SEED to repeat)")
        self.assertEqual(load_example().main(SMALL + ["--seed", str(SEED), *extra]), 0)

    def test_bf16_cache_decode_and_speculative_steps_under_one_graph(self):
        self.run_example()

    def test_e4m3_cache_with_device_scales(self):
        self.run_example("--kv-dtype", "e4m3")


if __name__ == "__main__":
    unittest.main()
