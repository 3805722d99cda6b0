"""Bad use of ipex_tool.optimize: each is a Python exception or warning that names the cause;
the interpreter survives the library's errors and keeps working."""

import warnings

import torch

from py_common import ConvBnRelu, TestCase, ipex, main


class Untraceable(torch.nn.Module):
    """Neither traceable (returns a Python string) nor scriptable (calls an arbitrary object)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.helper = object()

    def forward(self, x):
        self.helper.__class__  # noqa: B018  (untyped attribute: script fails)
        return str(self.fc(x))


class ValueBranch(torch.nn.Module):
    """A Python branch on a tensor value: a trace would keep one path; scripting keeps both."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        if bool(x.sum() > 0):
            return self.fc(x)
        return -self.fc(x)


class OptimizeErrors(TestCase):
    def setUp(self):
        super().setUp()
        self.model = ConvBnRelu().eval()
        self.x = torch.randn(2, 3, 16, 16)

    def test_unfused_optimizer_is_named(self):
        rprop = torch.optim.Rprop(self.model.parameters(), lr=0.1)
        with self.assertRaisesRegex(NotImplementedError, "torch.optim.rprop.Rprop has no fused step here.*Leave optimizer= out"):
            ipex.optimize(self.model, optimizer=rprop)

    def test_unknown_keyword_suggests_the_knob(self):
        with self.assertRaisesRegex(TypeError, "unknown keyword argument 'conv_bn_fold'.*'conv_bn_folding'"):
            ipex.optimize(self.model, conv_bn_fold=False)
        with self.assertRaisesRegex(TypeError, "unknown keyword argument 'frobnicate'"):
            ipex.optimize(self.model, frobnicate=True)

    def test_knob_values_are_booleans(self):
        with self.assertRaisesRegex(TypeError, "weights_prepack must be True, False or None"):
            ipex.optimize(self.model, weights_prepack="yes")

    def test_bad_dtype(self):
        with self.assertRaisesRegex(ValueError, "dtype torch.int8 is not supported.*ipex_tool.quantization"):
            ipex.optimize(self.model, dtype=torch.int8)
        with self.assertRaisesRegex(TypeError, "dtype must be a torch.dtype"):
            ipex.optimize(self.model, dtype="bf16")

    def test_bad_level(self):
        with self.assertRaisesRegex(ValueError, "level 'O3'.*'O0', 'O1'"):
            ipex.optimize(self.model, level="O3")

    def test_not_a_module(self):
        with self.assertRaisesRegex(TypeError, "model must be a torch.nn.Module"):
            ipex.optimize(lambda x: x)

    def test_untraceable_and_unscriptable_model(self):
        with self.assertRaisesRegex(RuntimeError, "cannot be traced .* or scripted"):
            ipex.optimize(Untraceable().eval(), sample_input=torch.randn(2, 4))
        lazy = ipex.optimize(Untraceable().eval())
        with self.assertRaisesRegex(RuntimeError, "cannot be traced .* or scripted"):
            lazy(torch.randn(2, 4))

    def test_value_dependent_trace_is_scripted_instead(self):
        model = ValueBranch().eval()
        optimized = ipex.optimize(model, sample_input=torch.ones(2, 4))
        for x in (torch.ones(2, 4), -torch.ones(2, 4)):
            with torch.no_grad():
                self.assert_close(optimized(x), model(x))

    def test_library_errors_are_exceptions_with_its_message(self):
        traced = torch.jit.trace(self.model, self.x)
        with self.assertRaisesRegex(ValueError, "optimize: .*model"):
            ipex.optimize(traced, sample_input=torch.randn(2, 5, 16, 16))  # wrong channel count
        optimized = ipex.optimize(traced, sample_input=self.x)  # the process goes on
        with torch.no_grad():
            self.assert_close(optimized(self.x), self.model(self.x))

    def test_knobs_not_honoured_are_warnings_naming_them(self):
        cases = {
            "split_master_weight_for_bf16": {"split_master_weight_for_bf16": True},
            "fuse_update_step": {"fuse_update_step": True},
            "graph_mode=False": {"graph_mode": False},
            "inplace=True": {"inplace": True},
        }
        for knob, kwargs in cases.items():
            with self.subTest(knob), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                ipex.optimize(self.model, sample_input=self.x, **kwargs)
                names = [w for w in self.ipex_warnings(caught) if knob in w]
                self.assertEqual(len(names), 1, [str(w.message) for w in caught])
                self.assertEqual(caught[0].filename, __file__, "the warning points at the caller")

    def test_honoured_knobs_do_not_warn(self):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ipex.optimize(self.model, sample_input=self.x, split_master_weight_for_bf16=False, graph_mode=True,
                          inplace=False, conv_bn_folding=True)
        self.assertEqual(self.ipex_warnings(caught), [])


if __name__ == "__main__":
    main()
