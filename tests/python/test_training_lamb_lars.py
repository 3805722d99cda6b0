"""ipex_tool.optim.Lamb and Lars (IPEX's, under its module paths too) through
ipex_tool.optimize: the fp32 model's steps are the classes' own fused steps (which the gtests
hold against fp64 references of the published formulas); with dtype=torch.bfloat16 the
recombined masters equal the fp32 step on the same bf16 gradients after every step, exactly;
Lars's lars=False groups take SGD's step; every fused step bumps the parameter's version, so
autograd refuses a backward through a graph that saved the parameter before the step."""

import copy

import torch

from py_common import TestCase, ipex, main
from ipex_tool.optim import combine_master
from ipex_tool.optim._lamb import Lamb
from ipex_tool.optim._lars import Lars, create_optimizer_lars


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(12, 24)
        self.norm = torch.nn.LayerNorm(24)
        self.fc2 = torch.nn.Linear(24, 5)

    def forward(self, x):
        return self.fc2(torch.relu(self.norm(self.fc1(x).float())))  # the norm in fp32 (1.13 has no bf16 rule)


def batches(seed, steps=8):
    generator = torch.Generator().manual_seed(seed)
    return [(torch.randn(8, 12, generator=generator), torch.randint(0, 5, (8,), generator=generator))
            for _ in range(steps)]


def loss_of(model, x, y, bf16):
    with torch.cpu.amp.autocast(enabled=bf16, dtype=torch.bfloat16):
        out = model(x)
    return torch.nn.functional.cross_entropy(out.float(), y)


def same_bits(a, b):
    return a.dtype == b.dtype == torch.float32 and torch.equal(a.view(torch.int32), b.view(torch.int32))


OPTIMIZERS = [
    (Lamb, dict(lr=1e-2)),
    (Lamb, dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=1e-2, fused=True)),
    (Lars, dict(lr=0.5)),
    (Lars, dict(lr=0.5, momentum=0.9, eeta=2e-3, weight_decay=5e-4, epsilon=1e-8)),
]


class LambLars(TestCase):
    def test_ipex_module_paths(self):
        self.assertIs(ipex.optim.Lamb, Lamb)
        self.assertIs(ipex.optim.Lars, Lars)
        self.assertIn(Lamb, ipex.optim.FUSED_OPTIMIZERS)
        self.assertIn(Lars, ipex.optim.FUSED_OPTIMIZERS)

    def run_pair(self, opt_cls, options, bf16, make=None):
        """(optimized model, its optimizer) and an fp32 copy with the class's own step, trained on
        the same gradients; returns after checking the masters after every step."""
        torch.manual_seed(0)
        model = Net()
        reference = copy.deepcopy(model)
        make = make or (lambda m: opt_cls(m.parameters(), **options))
        ref_opt = make(reference)
        model, opt = ipex.optimize(model, optimizer=make(model), dtype=torch.bfloat16 if bf16 else None)
        if bf16:
            self.assertEqual(model.fc1.weight.dtype, torch.bfloat16)
        ref_params = dict(reference.named_parameters())
        for step, (x, y) in enumerate(batches(1)):
            opt.zero_grad()
            loss_of(model, x, y, bf16).backward()
            for name, param in model.named_parameters():
                ref_params[name].grad = param.grad.float()
            opt.step()
            ref_opt.step()
            for name, param in model.named_parameters():
                trail = opt.state[param].get("trail")
                master = combine_master(param, trail) if trail is not None else param.detach()
                self.assertTrue(same_bits(master, ref_params[name].detach()),
                                f"{opt_cls.__name__}{options} bf16={bf16} step {step}: {name} differs")
        return model, opt

    def test_split_masters_equal_the_fp32_step(self):
        for opt_cls, options in OPTIMIZERS:
            for bf16 in (False, True):
                with self.subTest(optimizer=opt_cls.__name__, bf16=bf16, **options):
                    self.run_pair(opt_cls, options, bf16)

    def test_create_optimizer_lars_groups(self):
        make = lambda m: create_optimizer_lars(m, lr=0.5, momentum=0.9, weight_decay=1e-3, bn_bias_separately=True,
                                               epsilon=0.0)
        for bf16 in (False, True):
            with self.subTest(bf16=bf16):
                model, opt = self.run_pair(Lars, {}, bf16, make)
                self.assertEqual([g["lars"] for g in opt.param_groups], [True, False, False])
                self.assertEqual(len(opt.param_groups[1]["params"]), 2)  # LayerNorm's weight and bias

    def test_lars_false_group_is_sgd(self):
        torch.manual_seed(1)
        a = torch.nn.Parameter(torch.randn(30))
        b = torch.nn.Parameter(a.detach().clone())
        lars = Lars([dict(params=[a], lars=False)], lr=0.1, momentum=0.9, weight_decay=1e-2)
        sgd = torch.optim.SGD([b], lr=0.1, momentum=0.9, weight_decay=1e-2, foreach=False)
        for _ in range(10):
            grad = torch.randn(30)
            a.grad, b.grad = grad.clone(), grad.clone()
            lars.step()
            sgd.step()
        self.assertTrue(same_bits(a.detach(), b.detach()))

    def test_the_step_bumps_the_version(self):
        for opt_cls, options in [(torch.optim.SGD, dict(lr=0.1, momentum=0.9)), (torch.optim.Adagrad, dict(lr=0.1)),
                                 (torch.optim.Adam, dict(lr=0.1)), (torch.optim.AdamW, dict(lr=0.1))] + OPTIMIZERS:
            for bf16 in (False, True):
                with self.subTest(optimizer=opt_cls.__name__, bf16=bf16):
                    torch.manual_seed(2)
                    model = Net()
                    model, opt = ipex.optimize(model, optimizer=opt_cls(model.parameters(), **options),
                                               dtype=torch.bfloat16 if bf16 else None)
                    x, y = batches(3, 1)[0]
                    loss_of(model, x, y, bf16).backward()
                    weight = model.fc1.weight
                    before = weight._version
                    # a graph that saved the weight before the step
                    with torch.cpu.amp.autocast(enabled=False):
                        pending = (weight.float() * weight.float()).sum() if bf16 else (weight * weight).sum()
                    opt.step()
                    self.assertEqual(weight._version, before + 1)
                    if not bf16:  # weight.float() of a bf16 weight is a copy; fp32 saves the weight itself
                        with self.assertRaisesRegex(RuntimeError, "modified by an inplace operation"):
                            pending.backward()

    def test_bad_use_is_an_exception(self):
        with self.assertRaisesRegex(RuntimeError, r"\(Lamb\): sparse gradients are not supported"):
            emb = torch.nn.Embedding(10, 4, sparse=True)
            emb, opt = ipex.optimize(emb, optimizer=Lamb(emb.parameters()))
            emb(torch.tensor([1, 2])).sum().backward()
            opt.step()
        with self.assertRaisesRegex(RuntimeError, "eeta \\(the trust coefficient\\) must be > 0"):
            torch.ops.ipex.lars_step(torch.zeros(4), torch.zeros(4), None, None, 0.1, 0.0, 0.0, 0.0, 0.0, True)
        with self.assertRaisesRegex(RuntimeError, "exp_avg has shape"):
            torch.ops.ipex.lamb_step(torch.zeros(4), torch.zeros(4), torch.zeros(3), torch.zeros(4), None, 1, 1e-3,
                                     0.9, 0.999, 1e-8, 0.0)
        with self.assertRaisesRegex(ValueError, "Invalid eeta"):
            Lars(Net().parameters(), lr=0.1, eeta=0.0)


if __name__ == "__main__":
    main()
