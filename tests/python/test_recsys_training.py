"""Training through the merged EmbeddingBag (ipex::merged_embedding_bag's Autograd kernel, the
fused ipex::merged_embedding_bag_sgd_step / _adagrad_step, ipex_tool.nn and ipex_tool.optimize):
gradients against nn.EmbeddingBag's (fp64 reference; sparse rows equal aten's fp32 ones), the
fused updates against torch.optim's sparse SGD / Adagrad on the separate tables over many steps
(within 1 ulp), split bf16 tables equal to the fp32 run once recombined, a small DLRM trained to
torch's parameters, and bad input named."""

import copy

import torch

from py_common import TestCase, ipex, main
from ipex_tool.nn import MergedEmbeddingBag, MergedEmbeddingBagWithAdaGrad, MergedEmbeddingBagWithSGD, master_weights

STEPS = 60
SHAPES = [(13, 7), (5, 1), (40, 17)]  # rows, dim: odd on purpose


def max_ulp(a, b):
    return (a.view(torch.int32).long() - b.view(torch.int32).long()).abs().max().item()


def make_tables(mode, sparse, padding=(None, 2, None), include_last_offset=False):
    return [torch.nn.EmbeddingBag(rows, dim, mode=mode, sparse=sparse, padding_idx=pad,
                                  include_last_offset=include_last_offset)
            for (rows, dim), pad in zip(SHAPES, padding)]


def make_batch(generator, bags=6, include_last_offset=False, index_dtype=torch.long, weighted=False):
    """Per table: bags of 0-5 indices (bag 1 empty), drawn from few rows so they repeat across bags."""
    indices, offsets, psw = [], [], []
    for rows, _ in SHAPES:
        sizes = torch.randint(0, 6, (bags,), generator=generator)
        sizes[1] = 0
        total = int(sizes.sum())
        idx = torch.randint(0, min(rows, 4), (total,), generator=generator)
        off = torch.cat([torch.zeros(1, dtype=torch.long), sizes.cumsum(0)])
        indices.append(idx.to(index_dtype))
        offsets.append((off if include_last_offset else off[:-1]).to(index_dtype))
        psw.append(torch.rand(total, generator=generator) if weighted else None)
    return indices, offsets, psw


def reference_outputs(tables, indices, offsets, psw):
    return [t(i, o, per_sample_weights=p) for t, i, o, p in zip(tables, indices, offsets, psw)]


def loss_of(outputs, grads):
    return sum((o.float() * g).sum() for o, g in zip(outputs, grads))


class Backward(TestCase):
    def check(self, mode, sparse, weighted=False, include_last_offset=False, index_dtype=torch.long):
        generator = torch.Generator().manual_seed(1)
        tables = make_tables(mode, sparse, include_last_offset=include_last_offset)
        merged = MergedEmbeddingBag.from_embeddingbag_list(tables)
        indices, offsets, psw = make_batch(generator, include_last_offset=include_last_offset,
                                           index_dtype=index_dtype, weighted=weighted)
        psw = [p.requires_grad_() if p is not None else None for p in psw]
        outputs = merged(indices, offsets, psw if weighted else None)
        grads = [torch.randn(o.shape, generator=generator) for o in outputs]
        loss_of(outputs, grads).backward()
        ours = [t.weight.grad for t in tables]
        ours_psw = [p.grad for p in psw] if weighted else []
        # aten's fp32 gradient: the same rows, bit for bit (sparse), and an fp64 reference.
        aten_tables = copy.deepcopy(tables)
        for t in aten_tables:
            t.weight.grad = None
        ref64 = [copy.deepcopy(t).double() for t in aten_tables]
        aten_psw = [p.detach().clone().requires_grad_() if p is not None else None for p in psw]
        loss_of(reference_outputs(aten_tables, indices, offsets, aten_psw), grads).backward()
        psw64 = [p.detach().double().requires_grad_() if p is not None else None for p in psw]
        loss_of(reference_outputs(ref64, indices, offsets, psw64), [g.double() for g in grads]).backward()
        for t, (mine, aten, ref) in enumerate(zip(ours, aten_tables, ref64)):
            self.assertEqual(mine.is_sparse, sparse, t)
            if sparse:
                self.assertTrue(torch.equal(mine._indices(), aten.weight.grad._indices()), t)
                self.assertTrue(torch.equal(mine._values(), aten.weight.grad._values()), t)
            dense = mine.to_dense().double()
            scale = max(1.0, ref.weight.grad.to_dense().abs().max().item())
            self.assertLess((dense - ref.weight.grad.to_dense()).abs().max().item() / scale, 1e-6, t)
        for t, (mine, ref) in enumerate(zip(ours_psw, psw64)):
            if ref is None:
                continue
            scale = max(1.0, ref.grad.abs().max().item())
            self.assertLess((mine.double() - ref.grad).abs().max().item() / scale, 1e-6, t)

    def test_sum_sparse(self):
        self.check("sum", True)

    def test_sum_dense(self):
        self.check("sum", False)

    def test_mean_sparse_and_dense(self):
        self.check("mean", True)
        self.check("mean", False)

    def test_per_sample_weights(self):
        self.check("sum", True, weighted=True)
        self.check("sum", False, weighted=True)

    def test_include_last_offset_int32(self):
        self.check("sum", True, include_last_offset=True, index_dtype=torch.int32)
        self.check("mean", False, include_last_offset=True)

    def test_only_padding_and_empty_bags(self):
        table = torch.nn.EmbeddingBag(6, 3, mode="mean", sparse=True, padding_idx=4)
        merged = MergedEmbeddingBag.from_embeddingbags([table])
        out = merged([torch.tensor([4, 4])], [torch.tensor([0, 0, 2])])
        out[0].sum().backward()
        self.assertEqual(tuple(table.weight.grad._indices().shape), (1, 0))
        self.assertEqual(tuple(table.weight.grad._values().shape), (0, 3))

    def test_scripted_module_trains(self):
        tables = make_tables("sum", True)
        eager = MergedEmbeddingBag.from_embeddingbag_list(copy.deepcopy(tables))
        scripted = torch.jit.script(MergedEmbeddingBag.from_embeddingbag_list(tables))
        indices, offsets, psw = make_batch(torch.Generator().manual_seed(2), weighted=True)
        for module in (eager, scripted):
            module(indices, offsets, psw)[0].sum().backward()
        for a, b in zip(eager.tables, scripted.tables):
            self.assertTrue(torch.equal(a.weight.grad.to_dense(), b.weight.grad.to_dense()))

    def test_no_grad_mode_is_inference(self):
        merged = MergedEmbeddingBag.from_embeddingbag_list(make_tables("sum", True))
        indices, offsets, _ = make_batch(torch.Generator().manual_seed(3))
        with torch.no_grad():
            self.assertFalse(merged(indices, offsets)[0].requires_grad)


def run_fused(kind, optimizer_kwargs, split=False, bound=False, mode="sum", steps=STEPS):
    """(torch.optim on separate sparse tables, our merged tables' fp32 masters) after `steps` steps
    with the same batches and output gradients."""
    generator = torch.Generator().manual_seed(4)
    reference = make_tables(mode, True)
    for t in reference:
        with torch.no_grad():
            t.weight.copy_(torch.randn(t.weight.shape, generator=generator))
    ours = copy.deepcopy(reference)
    optimizer_cls = torch.optim.SGD if kind == "sgd" else torch.optim.Adagrad
    reference_optimizer = optimizer_cls([t.weight for t in reference], **optimizer_kwargs)
    if bound:
        model = torch.nn.Module()
        model.emb = MergedEmbeddingBag.from_embeddingbag_list(ours)
        optimizer = optimizer_cls([t.weight for t in ours], **optimizer_kwargs)
        model, optimizer = ipex.optimize(model, optimizer=optimizer, dtype=torch.bfloat16 if split else None)
        merged = model.emb
    else:
        module_cls = MergedEmbeddingBagWithSGD if kind == "sgd" else MergedEmbeddingBagWithAdaGrad
        merged = module_cls.from_embeddingbag_list(ours, **optimizer_kwargs)
        if split:
            merged.to_bfloat16_train()
    for _ in range(steps):
        indices, offsets, _ = make_batch(generator)
        grads = [torch.randn(6, dim, generator=generator) for _, dim in SHAPES]
        reference_optimizer.zero_grad()
        loss_of(reference_outputs(reference, indices, offsets, [None] * 3), grads).backward()
        reference_optimizer.step()
        loss_of(merged(indices, offsets), grads).backward()
        for t in ours:
            assert t.weight.grad is None
    return [t.weight.detach() for t in reference], master_weights(merged)


class FusedUpdate(TestCase):
    CASES = [("sgd", dict(lr=0.05)), ("adagrad", dict(lr=0.05)), ("adagrad", dict(lr=0.1, eps=1e-6))]

    def test_fp32_equals_torch_optim(self):
        for kind, kwargs in self.CASES:
            for mode in ("sum", "mean"):
                reference, ours = run_fused(kind, kwargs, mode=mode)
                for t, (a, b) in enumerate(zip(reference, ours)):
                    self.assertLessEqual(max_ulp(a, b), 1, (kind, kwargs, mode, t))

    def test_bound_to_optimizer_equals_torch_optim(self):
        for kind, kwargs in [("sgd", dict(lr=0.05, maximize=True)),
                             ("adagrad", dict(lr=0.05, lr_decay=1e-2, initial_accumulator_value=0.1))]:
            reference, ours = run_fused(kind, kwargs, bound=True)
            for t, (a, b) in enumerate(zip(reference, ours)):
                self.assertLessEqual(max_ulp(a, b), 1, (kind, t))

    def test_split_bf16_equals_fp32(self):
        # The gradients do not depend on the tables (loss = sum(out * G)), so the split run sees
        # the fp32 run's gradient rows: its recombined masters must equal them exactly.
        for kind, kwargs in self.CASES[:2]:
            for bound in (False, True):
                _, fp32 = run_fused(kind, kwargs, bound=bound, steps=20)
                _, split = run_fused(kind, kwargs, split=True, bound=bound, steps=20)
                for t, (a, b) in enumerate(zip(fp32, split)):
                    self.assertTrue(torch.equal(a, b), (kind, bound, t))

    def test_split_state_in_optimizer(self):
        tables = make_tables("sum", True)
        model = torch.nn.Module()
        model.emb = MergedEmbeddingBag.from_embeddingbag_list(tables)
        optimizer = torch.optim.Adagrad([t.weight for t in tables], lr=0.1)
        ipex.optimize(model, optimizer=optimizer, dtype=torch.bfloat16)
        for t in tables:
            self.assertEqual(t.weight.dtype, torch.bfloat16)
            self.assertEqual(optimizer.state[t.weight]["trail"].dtype, torch.int16)
        indices, offsets, _ = make_batch(torch.Generator().manual_seed(5))
        out = model.emb(indices, offsets)
        self.assertEqual(out[0].dtype, torch.float32)
        loss_of(out, [torch.ones_like(o) for o in out]).backward()
        self.assertEqual(float(optimizer.state[tables[0].weight]["step"]), 1.0)


class DLRM(torch.nn.Module):
    """Bottom MLP, sparse EmbeddingBag tables, dot interaction, top MLP."""

    def __init__(self, dense=4, dim=8, rows=(30, 7, 50)):
        super().__init__()
        self.bottom = torch.nn.Sequential(torch.nn.Linear(dense, 16), torch.nn.ReLU(), torch.nn.Linear(16, dim))
        self.emb = torch.nn.ModuleList([torch.nn.EmbeddingBag(r, dim, mode="sum", sparse=True) for r in rows])
        pairs = (len(rows) + 1) * len(rows) // 2
        self.top = torch.nn.Sequential(torch.nn.Linear(dim + pairs, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

    def forward(self, dense, indices, offsets):
        x = self.bottom(dense)
        if isinstance(self.emb, MergedEmbeddingBag):
            ly = self.emb(indices, offsets)
        else:
            ly = [table(i, o) for table, i, o in zip(self.emb, indices, offsets)]
        t = torch.stack([x] + list(ly), dim=1)
        z = torch.bmm(t, t.transpose(1, 2))
        rows, cols = torch.tril_indices(t.shape[1], t.shape[1], -1)
        return self.top(torch.cat([x, z[:, rows, cols]], dim=1))


class DLRMTraining(TestCase):
    def test_trains_to_torch_parameters(self):
        torch.manual_seed(6)
        stock = DLRM()
        ours = copy.deepcopy(stock)
        ours.emb = MergedEmbeddingBag.from_embeddingbag_list(ours.emb)
        stock_optimizer = torch.optim.SGD(stock.parameters(), lr=0.05)
        # weights_prepack=False keeps aten's linears, so the MLPs sum in the same order as stock's
        # and the tables' fused update is what the 1-ulp bound checks
        ours, optimizer = ipex.optimize(ours, optimizer=torch.optim.SGD(ours.parameters(), lr=0.05),
                                        weights_prepack=False)
        self.assertTrue(ours.emb.fused_update)
        generator = torch.Generator().manual_seed(7)
        for _ in range(30):
            dense = torch.randn(16, 4, generator=generator)
            indices, offsets = [], []
            for rows in (30, 7, 50):
                sizes = torch.randint(0, 4, (16,), generator=generator)
                indices.append(torch.randint(0, rows, (int(sizes.sum()),), generator=generator))
                offsets.append(torch.cat([torch.zeros(1, dtype=torch.long), sizes.cumsum(0)[:-1]]))
            target = torch.rand(16, 1, generator=generator)
            for model, opt in ((stock, stock_optimizer), (ours, optimizer)):
                opt.zero_grad()
                loss = torch.nn.functional.binary_cross_entropy_with_logits(model(dense, indices, offsets), target)
                loss.backward()
                opt.step()
        for (name, a), b in zip(stock.named_parameters(), list(ours.parameters())):
            self.assertLessEqual(max_ulp(a.detach(), b.detach()), 1, name)


class Errors(TestCase):
    def setUp(self):
        super().setUp()
        self.tables = make_tables("sum", True)
        self.indices, self.offsets, _ = make_batch(torch.Generator().manual_seed(8))
        self.weights = [t.weight.detach().clone() for t in self.tables]
        self.grads = [torch.randn(6, dim) for _, dim in SHAPES]
        self.args = (self.indices, self.offsets, [None] * 3, [-1, 2, -1], 0, False)

    def test_bad_input_named(self):
        merged = MergedEmbeddingBag.from_embeddingbag_list(self.tables)
        bad = list(self.indices)
        bad[2] = torch.tensor([0, 40] + [0] * (len(bad[2]) - 2))
        with self.assertRaisesRegex(RuntimeError, r"index 40 .* outside the 40-row table"):
            merged(bad, self.offsets)
        sgd = torch.ops.ipex.merged_embedding_bag_sgd_step
        grads = list(self.grads)
        grads[1] = torch.randn(5, 1)
        with self.assertRaisesRegex(RuntimeError, r"table 1: grad_outputs\[1\] must be fp32 or bf16 \[6, 1\]"):
            sgd(self.weights, grads, *self.args, [None] * 3, 0.1)
        with self.assertRaisesRegex(RuntimeError, r"indices\[2\]\[1\] = 40 is outside"):
            sgd(self.weights, self.grads, bad, *self.args[1:], [None] * 3, 0.1)
        with self.assertRaisesRegex(RuntimeError, r"table 0: a trail goes with a bf16 parameter"):
            sgd(self.weights, self.grads, *self.args, [torch.zeros(13, 7, dtype=torch.int16), None, None], 0.1)
        sums = [torch.zeros_like(w) for w in self.weights]
        sums[1] = sums[1].double()
        with self.assertRaisesRegex(RuntimeError, r"table 1: state_sums\[1\] must be float32"):
            torch.ops.ipex.merged_embedding_bag_adagrad_step(self.weights, self.grads, *self.args, sums, [None] * 3,
                                                             [1, 1, 1], 0.1, 0.0, 1e-10)
        with self.assertRaisesRegex(RuntimeError, r"weights\[0\] must be an fp32 or bf16"):
            torch.ops.ipex.merged_embedding_bag_backward(self.grads, [self.weights[0].double()] + self.weights[1:],
                                                         *self.args, True)

    def test_options_refused(self):
        with self.assertRaisesRegex(ValueError, "weight_decay"):
            MergedEmbeddingBagWithSGD.from_embeddingbag_list(self.tables, weight_decay=1e-4)
        model = torch.nn.Module()
        model.emb = MergedEmbeddingBag.from_embeddingbag_list(self.tables)
        with self.assertRaisesRegex(ValueError, "MergedEmbeddingBag emb: weight_decay"):
            ipex.optimize(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1, weight_decay=1e-4))
        mixed = [torch.nn.EmbeddingBag(3, 2, mode="sum"), torch.nn.EmbeddingBag(3, 2, mode="mean")]
        with self.assertRaisesRegex(ValueError, "table 1 has mode='mean'"):
            MergedEmbeddingBag.from_embeddingbag_list(mixed)


if __name__ == "__main__":
    main()
