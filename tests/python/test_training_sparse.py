"""Sparse embedding gradients (nn.Embedding / nn.EmbeddingBag with sparse=True) through the
fused SGD and Adagrad: within 1 ulp of torch.optim's own sparse step over 200 steps (bitwise on
Debian's torch 1.13), duplicate indices (summed in coalesce's order for Adagrad, applied one
after the other for SGD) and empty gradients included; split bf16 Embedding weights equal the
fp32 step on the same bf16 gradients exactly; weight decay (and SGD momentum) with a sparse
gradient are errors; the ops take row indices and values directly."""

import torch

from py_common import TestCase, ipex, main
from ipex_tool.optim import combine_master

STEPS = 200
ROWS, DIM = 40, 19


def max_ulp(a, b):
    return (a.view(torch.int32).long() - b.view(torch.int32).long()).abs().max().item()


def sparse_grad(generator, step, empty=True):
    """An uncoalesced row gradient: duplicates, sometimes empty (torch 1.13's Adagrad raises on an
    empty one; ours leaves the parameter as it is), sometimes many copies of a row."""
    nnz = 0 if empty and step % 37 == 5 else (60 if step % 11 == 3 else 1 + step % 30)
    high = 3 if step % 11 == 3 else ROWS  # 60 entries on 3 rows: long runs of one index
    indices = torch.randint(0, high, (1, nnz), generator=generator)
    values = torch.randn(nnz, DIM, generator=generator) * 0.1
    return torch.sparse_coo_tensor(indices, values, (ROWS, DIM))


OPTIMIZERS = [
    (torch.optim.SGD, dict(lr=0.05)),
    (torch.optim.SGD, dict(lr=0.05, maximize=True)),
    (torch.optim.Adagrad, dict(lr=0.05)),
    (torch.optim.Adagrad, dict(lr=0.05, lr_decay=1e-2, initial_accumulator_value=0.1, eps=1e-6, maximize=True)),
]


class Sparse(TestCase):
    def test_fp32_equals_torch_optim(self):
        for opt_cls, options in OPTIMIZERS:
            with self.subTest(optimizer=opt_cls.__name__, **options):
                torch.manual_seed(0)
                weight = torch.randn(ROWS, DIM)
                fused = torch.nn.Parameter(weight.clone())
                reference = torch.nn.Parameter(weight.clone())
                _, opt = ipex.optimize(torch.nn.Module(), optimizer=opt_cls([fused], **options))
                ref_opt = opt_cls([reference], **options)
                generator = torch.Generator().manual_seed(1)
                worst = 0
                for step in range(STEPS):
                    grad = sparse_grad(generator, step, empty=opt_cls is torch.optim.SGD)
                    fused.grad, reference.grad = grad.clone(), grad.clone()
                    opt.step()
                    ref_opt.step()
                    worst = max(worst, max_ulp(fused.detach(), reference.detach()))
                    self.assertLessEqual(worst, 1, f"step {step}")
                self.assertFalse(torch.equal(fused.detach(), weight))

    def test_split_embedding_equals_the_fp32_step(self):
        for opt_cls, options in OPTIMIZERS:
            with self.subTest(optimizer=opt_cls.__name__, **options):
                torch.manual_seed(2)
                emb = torch.nn.Embedding(ROWS, DIM, sparse=True)
                reference = torch.nn.Parameter(emb.weight.detach().clone())
                emb, opt = ipex.optimize(emb, optimizer=opt_cls(emb.parameters(), **options), dtype=torch.bfloat16)
                self.assertEqual(emb.weight.dtype, torch.bfloat16)
                _, ref_opt = ipex.optimize(torch.nn.Module(), optimizer=opt_cls([reference], **options))
                generator = torch.Generator().manual_seed(3)
                for step in range(60):
                    opt.zero_grad()
                    ids = torch.randint(0, ROWS, (step % 25,), generator=generator)
                    if ids.numel() == 0 and opt_cls is torch.optim.Adagrad:
                        continue
                    (emb(ids) * torch.randn(ids.numel(), DIM, generator=generator)).sum().backward()
                    self.assertTrue(emb.weight.grad.is_sparse)
                    self.assertEqual(emb.weight.grad.dtype, torch.bfloat16)
                    reference.grad = emb.weight.grad.float()
                    opt.step()
                    ref_opt.step()
                    master = combine_master(emb.weight, opt.state[emb.weight]["trail"])
                    self.assertTrue(torch.equal(master.view(torch.int32), reference.detach().view(torch.int32)),
                                    f"step {step}")

    def test_embedding_bag_trains(self):
        torch.manual_seed(4)
        bag = torch.nn.EmbeddingBag(ROWS, DIM, mode="sum", sparse=True)
        reference = torch.nn.EmbeddingBag(ROWS, DIM, mode="sum", sparse=True)
        reference.load_state_dict(bag.state_dict())
        bag, opt = ipex.optimize(bag, optimizer=torch.optim.Adagrad(bag.parameters(), lr=0.1))
        ref_opt = torch.optim.Adagrad(reference.parameters(), lr=0.1)
        ids, offsets = torch.tensor([1, 2, 2, 7, 1, 1]), torch.tensor([0, 3])
        for _ in range(20):
            for model, optimizer in ((bag, opt), (reference, ref_opt)):
                optimizer.zero_grad()
                model(ids, offsets).square().sum().backward()
                optimizer.step()
        self.assertLessEqual(max_ulp(bag.weight.detach(), reference.weight.detach()), 1)

    def test_empty_gradient_leaves_the_parameter(self):
        for opt_cls in (torch.optim.SGD, torch.optim.Adagrad):
            param = torch.nn.Parameter(torch.randn(ROWS, DIM))
            before = param.detach().clone()
            _, opt = ipex.optimize(torch.nn.Module(), optimizer=opt_cls([param], lr=0.1))
            param.grad = torch.sparse_coo_tensor(torch.zeros(1, 0, dtype=torch.long), torch.zeros(0, DIM),
                                                 (ROWS, DIM))
            opt.step()
            self.assertTrue(torch.equal(param.detach(), before))

    def test_ops_take_indices_and_values(self):
        torch.manual_seed(5)
        param, state_sum = torch.randn(6, 3), torch.zeros(6, 3)
        reference = torch.nn.Parameter(param.clone())
        indices, values = torch.tensor([4, 0, 4]), torch.randn(3, 3)
        torch.ops.ipex.sparse_adagrad_step(param, indices, values, state_sum, None, 1, 0.1, 0.0, 1e-10, False)
        reference.grad = torch.sparse_coo_tensor(indices[None], values, (6, 3))
        torch.optim.Adagrad([reference], lr=0.1).step()
        self.assertLessEqual(max_ulp(param, reference.detach()), 1)
        version = param._version
        torch.ops.ipex.sparse_sgd_step(param, indices, values, None, 0.1, False)
        self.assertEqual(param._version, version + 1)

    def test_bad_use_is_an_exception(self):
        grad = torch.sparse_coo_tensor(torch.tensor([[1, 1]]), torch.ones(2, DIM), (ROWS, DIM))
        for opt_cls, options, message in [
                (torch.optim.SGD, dict(lr=0.1, weight_decay=0.1), "weight_decay is not compatible with sparse"),
                (torch.optim.SGD, dict(lr=0.1, momentum=0.9), "momentum with sparse gradients is not fused"),
                (torch.optim.Adagrad, dict(lr=0.1, weight_decay=0.1), "weight_decay is not compatible with sparse")]:
            param = torch.nn.Parameter(torch.zeros(ROWS, DIM))
            _, opt = ipex.optimize(torch.nn.Module(), optimizer=opt_cls([param], **options))
            param.grad = grad
            with self.assertRaisesRegex(RuntimeError, message):
                opt.step()
        param = torch.zeros(ROWS, DIM)
        with self.assertRaisesRegex(RuntimeError, r"indices\[1\] = 40 is out of range for a parameter of 40 rows"):
            torch.ops.ipex.sparse_sgd_step(param, torch.tensor([0, 40]), torch.ones(2, DIM), None, 0.1, False)
        with self.assertRaisesRegex(RuntimeError, "values has shape"):
            torch.ops.ipex.sparse_sgd_step(param, torch.tensor([0, 1]), torch.ones(2, DIM + 1), None, 0.1, False)
        with self.assertRaisesRegex(RuntimeError, "indices must be int64"):
            torch.ops.ipex.sparse_sgd_step(param, torch.tensor([0, 1], dtype=torch.int32), torch.ones(2, DIM), None,
                                           0.1, False)
        with self.assertRaisesRegex(RuntimeError, "values must be a contiguous"):
            torch.ops.ipex.sparse_sgd_step(param, torch.tensor([0, 1]), torch.ones(DIM, 2).t(), None, 0.1, False)
        with self.assertRaisesRegex(RuntimeError, "the trail must be int16"):
            torch.ops.ipex.sparse_adagrad_step(param.bfloat16(), torch.tensor([0]), torch.ones(1, DIM),
                                               torch.zeros(ROWS, DIM), torch.zeros(ROWS, DIM), 1, 0.1, 0.0, 1e-10,
                                               False)


if __name__ == "__main__":
    main()
