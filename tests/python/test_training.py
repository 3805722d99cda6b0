"""Training with ipex_tool.optimize(model, optimizer=...): the fused steps of SGD, Adagrad, Adam
and AdamW equal torch.optim's (fp32 models, every option, bitwise); with dtype=torch.bfloat16 the
conv/linear weights become bf16 tops whose trails the optimizer holds, and after every step the
recombined fp32 masters equal torch.optim's fp32 update of the same bf16 gradients, exactly;
state_dicts restore the masters exactly; bad use is an exception naming the cause."""

import copy
import io

import torch

from py_common import TestCase, ipex, main
from ipex_tool.optim import combine_master

STEPS = 6


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(12, 24)
        self.scale = torch.nn.Parameter(torch.ones(24))  # stays fp32: the fused fp32 step beside the split ones
        self.fc2 = torch.nn.Linear(24, 5)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x) * self.scale))


class SmallCnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 6, 3, padding=1)
        self.fc = torch.nn.Linear(6 * 8 * 8, 5)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


OPTIMIZERS = [
    (torch.optim.SGD, dict(lr=0.05)),
    (torch.optim.SGD, dict(lr=0.05, momentum=0.9, weight_decay=1e-2)),
    (torch.optim.SGD, dict(lr=0.05, momentum=0.9, dampening=0.1, maximize=True)),
    (torch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3)),
    (torch.optim.Adagrad, dict(lr=1e-2)),
    (torch.optim.Adagrad, dict(lr=1e-2, lr_decay=1e-2, weight_decay=1e-2, initial_accumulator_value=0.1, eps=1e-6,
                               maximize=True)),
    (torch.optim.Adam, dict(lr=1e-2)),
    (torch.optim.Adam, dict(lr=1e-2, weight_decay=1e-2, amsgrad=True)),
    (torch.optim.Adam, dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-6, maximize=True)),
    (torch.optim.AdamW, dict(lr=1e-2)),
    (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1, amsgrad=True, maximize=True)),
]


def batches(model_cls, seed):
    generator = torch.Generator().manual_seed(seed)
    shape = (8, 12) if model_cls is Mlp else (4, 3, 8, 8)
    return [(torch.randn(shape, generator=generator), torch.randint(0, 5, (shape[0],), generator=generator))
            for _ in range(STEPS)]


def loss_of(model, x, y, bf16):
    with torch.cpu.amp.autocast(enabled=bf16, dtype=torch.bfloat16):
        out = model(x)
    return torch.nn.functional.cross_entropy(out.float(), y)


def masters(model, optimizer):
    """The model's parameters as fp32: split ones recombined from top and trail."""
    result = {}
    for name, param in model.named_parameters():
        trail = optimizer.state[param].get("trail")
        result[name] = combine_master(param, trail) if trail is not None else param.detach().clone()
    return result


def same_bits(a, b):
    return a.dtype == b.dtype == torch.float32 and torch.equal(a.view(torch.int32), b.view(torch.int32))


class Training(TestCase):
    def check_against_torch(self, model_cls, opt_cls, options, bf16):
        torch.manual_seed(0)
        model = model_cls()
        reference = copy.deepcopy(model)
        ref_opt = opt_cls(reference.parameters(), foreach=False, **options)
        model, opt = ipex.optimize(model, optimizer=opt_cls(model.parameters(), **options),
                                   dtype=torch.bfloat16 if bf16 else None)
        if bf16:
            self.assertEqual(model.fc2.weight.dtype if model_cls is Mlp else model.conv.weight.dtype, torch.bfloat16)
        ref_params = dict(reference.named_parameters())
        for step, (x, y) in enumerate(batches(model_cls, 1)):
            opt.zero_grad()
            loss_of(model, x, y, bf16).backward()
            # the reference takes the same (bf16-valued) gradients as fp32
            for name, param in model.named_parameters():
                ref_params[name].grad = param.grad.float()
            opt.step()
            ref_opt.step()
            for name, master in masters(model, opt).items():
                self.assertTrue(same_bits(master, ref_params[name].detach()),
                                f"{opt_cls.__name__}{options} step {step}: {name} differs from torch.optim")

    def test_split_bf16_masters_equal_the_fp32_update(self):
        for opt_cls, options in OPTIMIZERS:
            with self.subTest(optimizer=opt_cls.__name__, **options):
                self.check_against_torch(Mlp, opt_cls, options, bf16=True)
        self.check_against_torch(SmallCnn, torch.optim.SGD, dict(lr=0.05, momentum=0.9), bf16=True)
        self.check_against_torch(SmallCnn, torch.optim.AdamW, dict(lr=1e-2), bf16=True)

    def test_fp32_fused_steps_equal_torch_optim(self):
        for opt_cls, options in OPTIMIZERS:
            with self.subTest(optimizer=opt_cls.__name__, **options):
                self.check_against_torch(Mlp, opt_cls, options, bf16=False)
        self.check_against_torch(SmallCnn, torch.optim.Adam, dict(lr=1e-2, amsgrad=True), bf16=False)

    def test_split_training_lowers_the_loss(self):
        torch.manual_seed(0)
        model = Mlp()
        model, opt = ipex.optimize(model, optimizer=torch.optim.AdamW(model.parameters(), lr=1e-2),
                                   dtype=torch.bfloat16)
        x, y = batches(Mlp, 2)[0]
        first = loss_of(model, x, y, True).item()
        for _ in range(30):
            opt.zero_grad()
            loss_of(model, x, y, True).backward()
            opt.step()
        self.assertLess(loss_of(model, x, y, True).item(), 0.5 * first)

    def make(self, seed, opt_cls=torch.optim.Adam, **options):
        torch.manual_seed(seed)
        model = Mlp()
        return ipex.optimize(model, optimizer=opt_cls(model.parameters(), lr=1e-2, **options), dtype=torch.bfloat16)

    def train(self, model, opt, seed):
        for x, y in batches(Mlp, seed):
            opt.zero_grad()
            loss_of(model, x, y, True).backward()
            opt.step()

    def test_state_dicts_restore_the_masters_exactly(self):
        for opt_cls, options in [(torch.optim.Adam, dict(amsgrad=True)), (torch.optim.SGD, dict(momentum=0.9)),
                                 (torch.optim.Adagrad, dict(lr_decay=1e-2))]:
            with self.subTest(optimizer=opt_cls.__name__):
                model, opt = self.make(0, opt_cls, **options)
                self.train(model, opt, 3)
                buffer = io.BytesIO()
                torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buffer)
                buffer.seek(0)
                saved = torch.load(buffer)
                restored, restored_opt = self.make(1, opt_cls, **options)
                restored.load_state_dict(saved["model"])
                restored_opt.load_state_dict(saved["opt"])
                for name, master in masters(restored, restored_opt).items():
                    self.assertTrue(same_bits(master, masters(model, opt)[name]), name)
                for state in restored_opt.state.values():
                    for key, value in state.items():
                        if key == "trail":
                            self.assertEqual(value.dtype, torch.int16)
                        elif isinstance(value, torch.Tensor):
                            self.assertEqual(value.dtype, torch.float32, key)
                # both continue alike
                self.train(model, opt, 4)
                self.train(restored, restored_opt, 4)
                for name, master in masters(restored, restored_opt).items():
                    self.assertTrue(same_bits(master, masters(model, opt)[name]), name)

    def test_state_dict_of_another_shape_is_refused(self):
        model, opt = self.make(0)
        self.train(model, opt, 3)
        state = opt.state_dict()
        other = copy.deepcopy(state)
        first = next(iter(other["state"]))
        other["state"][first]["exp_avg"] = torch.zeros(3)
        with self.assertRaisesRegex(ValueError, r"state 'exp_avg' of parameter \d+ has shape \(3,\)"):
            opt.load_state_dict(other)
        unsplit = copy.deepcopy(state)
        del unsplit["state"][first]["trail"]
        with self.assertRaisesRegex(ValueError, "no 'trail'"):
            opt.load_state_dict(unsplit)

    def test_bad_use_is_an_exception(self):
        model = Mlp()
        with self.assertRaisesRegex(NotImplementedError, "torch.optim.rmsprop.RMSprop has no fused step"):
            ipex.optimize(model, optimizer=torch.optim.RMSprop(model.parameters()))
        with self.assertRaisesRegex(NotImplementedError, "dtype torch.float16"):
            ipex.optimize(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), dtype=torch.half)
        with self.assertRaisesRegex(NotImplementedError, "split_master_weight_for_bf16=True"):
            ipex.optimize(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), dtype=torch.bfloat16,
                          split_master_weight_for_bf16=False)
        half = Mlp().bfloat16()
        with self.assertRaisesRegex(ValueError, r"parameter scale is torch.bfloat16; the fused steps take float32"):
            ipex.optimize(half, optimizer=torch.optim.SGD(half.parameters(), lr=0.1))
        model, opt = ipex.optimize(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
        with self.assertRaisesRegex(ValueError, "already optimized"):
            ipex.optimize(model, optimizer=opt)
        # the ops' own checks arrive as exceptions with their message
        with self.assertRaisesRegex(RuntimeError, "the trail must be int16"):
            torch.ops.ipex.sgd_step(torch.zeros(4, dtype=torch.bfloat16), torch.zeros(4), None,
                                    torch.zeros(4, dtype=torch.int32), 0.1, 0.0, 0.0, 0.0, False, False, True)
        with self.assertRaisesRegex(RuntimeError, "the gradient has shape"):
            torch.ops.ipex.adam_step(torch.zeros(4), torch.zeros(5), torch.zeros(4), torch.zeros(4), None, None, 1,
                                     1e-3, 0.9, 0.999, 1e-8, 0.0, False, False)
        # sparse gradients: SGD and Adagrad step them (test_training_sparse.py), Adam refuses them
        bag = torch.nn.EmbeddingBag(10, 4, sparse=True)
        bag, bag_opt = ipex.optimize(bag, optimizer=torch.optim.Adam(bag.parameters(), lr=0.1), dtype=torch.bfloat16)
        self.assertEqual(bag.weight.dtype, torch.float32)
        bag(torch.tensor([1, 2, 3]), torch.tensor([0])).sum().backward()
        with self.assertRaisesRegex(RuntimeError, r"\(Adam\): sparse gradients are not supported"):
            bag_opt.step()
        # fuse_update_step=False leaves the optimizer as it is
        plain = torch.optim.SGD(model.parameters(), lr=0.1)
        self.assertIs(ipex.optimize(model, optimizer=plain, fuse_update_step=False)[1].step.__func__,
                      torch.optim.SGD.step)


if __name__ == "__main__":
    main()
