"""ipex_tool.optimize(model, optimizer=...) makes a model's nn.Linear modules TrainingLinear: forward
and backward through ipex::matmul. Outputs and the three gradients against an fp64 reference of
the same operand values (fp32: within fp32's bound on a k-term sum; bf16: plus half a bf16 step),
for 1-D, 2-D and 3-D inputs, without bias, without input grad; the compute dtype follows CPU
autocast (bf16 outputs, fp32 weight gradients for fp32 weights; a bf16 output with a bias rounds
twice, the product and then the sum); split bf16 weights get bf16
gradients; weights_prepack=False keeps aten's module; pickling and state_dicts are unchanged;
fp32 training follows stock training."""

import copy
import io

import torch

from py_common import TestCase, ipex, main
from ipex_tool.nn import TrainingLinear


def fp32_bound(a, b, k):
    """k * 2^-24 * sum |a||b| per element: fp32's bound on a k-term dot product (fp64 operands)."""
    return (a.abs() @ b.abs()) * k * 2.0 ** -24


class Net(torch.nn.Module):
    def __init__(self, bias=True):
        super().__init__()
        self.fc1 = torch.nn.Linear(13, 40, bias=bias)
        self.fc2 = torch.nn.Linear(40, 7)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def optimized(model, dtype=None, **options):
    return ipex.optimize(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.01), dtype=dtype, **options)[0]


class TrainingLinearTest(TestCase):
    def check_layer(self, layer, x, bf16):
        """y, dx, dW, db of `layer` on x against fp64 products of the same operand values."""
        x = x.clone().requires_grad_(True)
        y = layer(x)
        grad_out = torch.randn(y.shape, generator=torch.Generator().manual_seed(5)).to(y.dtype)
        y.backward(grad_out)
        k, n = layer.in_features, layer.out_features
        cast = torch.bfloat16 if bf16 else torch.float32
        xs = x.detach().to(cast).double().reshape(-1, k)
        w = layer.weight.detach().to(cast).double()
        dy = grad_out.to(cast).double().reshape(-1, n)
        product = xs @ w.t()
        checks = [(y, product + (layer.bias.detach().to(cast).double() if layer.bias is not None else 0),
                   fp32_bound(xs, w.t(), k)),
                  (x.grad, dy @ w, fp32_bound(dy, w, n)),
                  (layer.weight.grad, dy.t() @ xs, fp32_bound(dy.t(), xs, xs.shape[0]))]
        if layer.bias is not None:
            checks.append((layer.bias.grad, dy.sum(0), dy.abs().sum(0) * dy.shape[0] * 2.0 ** -24))
        for what, (got, want, bound) in zip(("y", "dx", "dW", "db"), checks):
            got = got.detach().double().reshape(want.shape)
            if bf16:
                bound = (want.abs() + bound) * 2.0 ** -8 + bound
                if what == "y" and layer.bias is not None:  # the product rounds to bf16, then the sum
                    bound = bound + (product.abs() + checks[0][2]).reshape(want.shape) * 2.0 ** -8
            excess = ((got - want).abs() - bound).flatten()
            self.assertTrue(excess.numel() == 0 or excess.max().item() <= 0,
                            f"{what}: {excess.max().item() if excess.numel() else 0:.3g} over the bound")
        return y

    def test_modules_become_training_linear(self):
        model = optimized(Net())
        self.assertEqual([type(m) for m in (model.fc1, model.fc2)], [TrainingLinear, TrainingLinear])
        self.assertTrue(isinstance(model.fc1, torch.nn.Linear))
        kept = optimized(Net(), weights_prepack=False)
        self.assertIs(type(kept.fc1), torch.nn.Linear)

    def test_fp32_products(self):
        torch.manual_seed(0)
        for bias in (True, False):
            layer = optimized(Net(bias)).fc1
            for shape in ((13,), (5, 13), (2, 3, 13), (0, 13)):
                layer.zero_grad()
                y = self.check_layer(layer, torch.randn(shape), bf16=False)
                self.assertEqual(y.dtype, torch.float32)
                self.assertEqual(tuple(y.shape), shape[:-1] + (40,))

    def test_autocast_computes_bf16_with_fp32_weight_gradients(self):
        torch.manual_seed(1)
        layer = optimized(Net()).fc1
        with torch.cpu.amp.autocast(dtype=torch.bfloat16):
            y = self.check_layer(layer, torch.randn(6, 13), bf16=True)
        self.assertEqual(y.dtype, torch.bfloat16)
        self.assertEqual(layer.weight.grad.dtype, torch.float32)
        self.assertEqual(layer.bias.grad.dtype, torch.float32)

    def test_split_bf16_weights(self):
        torch.manual_seed(2)
        layer = optimized(Net(), dtype=torch.bfloat16).fc1
        self.assertEqual(layer.weight.dtype, torch.bfloat16)
        x = torch.randn(9, 13)
        with torch.cpu.amp.autocast(dtype=torch.bfloat16):
            y = self.check_layer(layer, x, bf16=True)
        self.assertEqual(y.dtype, torch.bfloat16)
        self.assertEqual(layer.weight.grad.dtype, torch.bfloat16)
        # without autocast too: the bf16 weight decides, an fp32 input is cast as autocast would
        layer.zero_grad()
        self.check_layer(layer, x, bf16=True)

    def test_input_without_grad_and_no_grad_mode(self):
        layer = optimized(Net()).fc1
        x = torch.randn(4, 13)
        y = layer(x)
        y.sum().backward()
        self.assertIsNotNone(layer.weight.grad)
        with torch.no_grad():
            self.assertFalse(layer(x).requires_grad)
        with torch.inference_mode():
            self.assertTrue(torch.allclose(layer(x), y.detach(), rtol=0, atol=0))

    def test_pickle_and_state_dict(self):
        stock = Net()
        model = optimized(copy.deepcopy(stock))
        self.assertEqual(list(model.state_dict()), list(stock.state_dict()))
        buffer = io.BytesIO()
        torch.save(model, buffer)
        buffer.seek(0)
        loaded = torch.load(buffer)
        self.assertIs(type(loaded.fc1), TrainingLinear)
        x = torch.randn(3, 13)
        self.assertTrue(torch.equal(loaded(x), model(x)))

    def test_fp32_training_follows_stock(self):
        torch.manual_seed(3)
        stock = Net()
        ours = copy.deepcopy(stock)
        stock_opt = torch.optim.SGD(stock.parameters(), lr=0.05, momentum=0.9)
        ours, ours_opt = ipex.optimize(ours, optimizer=torch.optim.SGD(ours.parameters(), lr=0.05, momentum=0.9))
        generator = torch.Generator().manual_seed(4)
        for _ in range(20):
            x = torch.randn(16, 13, generator=generator)
            target = torch.randint(0, 7, (16,), generator=generator)
            for model, opt in ((stock, stock_opt), (ours, ours_opt)):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x), target).backward()
                opt.step()
        for (name, a), b in zip(stock.named_parameters(), ours.parameters()):
            scale = a.detach().abs().max().item()
            self.assertLess((a.detach() - b.detach()).abs().max().item(), 1e-4 * scale, name)


if __name__ == "__main__":
    main()
