"""model.state_dict() of a split-bf16 model (issue 51): the fp32 masters (top and trail
recombined, bit for bit, as IPEX saved them) by default, loadable by a plain torch model;
ipex_tool.optim.bf16_state_dict gives the bf16 tops; loading an fp32 state_dict into a split
model re-splits it exactly (tops in the model, trails in the optimizer), a bf16 one gives zero
trails; wrong shapes and lost trails are errors."""

import copy
import gc
import io

import torch

from py_common import TestCase, ipex, main
from ipex_tool.optim import bf16_state_dict, combine_master, master_state_dict


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4 * 6 * 6, 8)
        self.scale = torch.nn.Parameter(torch.ones(8))  # not split: stays fp32
        self.head = torch.nn.Linear(8, 3, bias=False)
        self.register_buffer("calls", torch.zeros(1))

    def forward(self, x):
        return self.head(torch.relu(self.fc(torch.relu(self.conv(x)).flatten(1))) * self.scale)


SPLIT = ["conv.weight", "conv.bias", "fc.weight", "fc.bias", "head.weight"]


def make(seed, opt_cls=torch.optim.Adam):
    torch.manual_seed(seed)
    model = Net()
    return ipex.optimize(model, optimizer=opt_cls(model.parameters(), lr=1e-2), dtype=torch.bfloat16)


def train(model, opt, seed, steps=4):
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(4, 3, 6, 6, generator=generator)
        y = torch.randint(0, 3, (4,), generator=generator)
        opt.zero_grad()
        with torch.cpu.amp.autocast():
            out = model(x)
        torch.nn.functional.cross_entropy(out.float(), y).backward()
        opt.step()


def masters(model, opt):
    return {name: combine_master(p, opt.state[p]["trail"]) if "trail" in opt.state[p] else p.detach()
            for name, p in model.named_parameters()}


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(torch.uint8), b.view(torch.uint8))


class StateDict(TestCase):
    def test_state_dict_holds_the_fp32_masters(self):
        model, opt = make(0)
        train(model, opt, 1)
        state = model.state_dict()
        self.assertEqual(list(state), list(Net().state_dict()))
        want = masters(model, opt)
        for name in SPLIT:
            self.assertEqual(model.get_parameter(name).dtype, torch.bfloat16)
            self.assertEqual(state[name].dtype, torch.float32, name)
            self.assertTrue(same_bits(state[name], want[name]), name)
            # the trail matters: the master is not the bf16 top widened
            self.assertFalse(torch.equal(state[name], model.get_parameter(name).float()), name)
        self.assertTrue(same_bits(state["scale"], model.scale.detach()))
        self.assertTrue(same_bits(master_state_dict(model)["fc.weight"], want["fc.weight"]))
        # a plain torch model loads it as it is (torch.save round trip)
        buffer = io.BytesIO()
        torch.save(state, buffer)
        buffer.seek(0)
        plain = Net()
        plain.load_state_dict(torch.load(buffer))
        for name, param in plain.named_parameters():
            self.assertTrue(same_bits(param.detach(), want[name]), name)

    def test_bf16_state_dict_holds_the_tops(self):
        model, opt = make(0)
        train(model, opt, 1)
        state = bf16_state_dict(model)
        for name in SPLIT:
            self.assertTrue(same_bits(state[name], model.get_parameter(name).detach()), name)
        self.assertEqual(state["scale"].dtype, torch.float32)
        self.assertEqual(model.state_dict()["fc.weight"].dtype, torch.float32, "the default comes back")
        # loaded back: tops as they are, zero trails (the master is the bf16 number)
        other, other_opt = make(5)
        other.load_state_dict(state)
        for name in SPLIT:
            param = other.get_parameter(name)
            self.assertTrue(same_bits(param.detach(), state[name]), name)
            self.assertEqual(int(other_opt.state[param]["trail"].abs().sum()), 0, name)

    def test_loading_fp32_masters_resplits_exactly(self):
        model, opt = make(0, torch.optim.SGD)
        train(model, opt, 1)
        saved = model.state_dict()
        restored, restored_opt = make(7, torch.optim.SGD)
        restored.load_state_dict(saved)
        want = masters(model, opt)
        got = masters(restored, restored_opt)
        for name, param in restored.named_parameters():
            self.assertTrue(same_bits(got[name], want[name]), name)
            if name in SPLIT:
                self.assertEqual(param.dtype, torch.bfloat16)
                self.assertTrue(same_bits(param.detach(), model.get_parameter(name).detach()), name)
        for name, value in restored.state_dict().items():
            self.assertTrue(same_bits(value, saved[name]), name)
        # with the optimizer's state too, both continue alike
        restored_opt.load_state_dict(opt.state_dict())
        train(model, opt, 2)
        train(restored, restored_opt, 2)
        got, want = masters(restored, restored_opt), masters(model, opt)
        for name in want:
            self.assertTrue(same_bits(got[name], want[name]), name)

    def test_fp32_checkpoint_of_a_plain_model_loads_into_a_split_one(self):
        torch.manual_seed(3)
        plain = Net()
        model, opt = make(0)
        model.load_state_dict(plain.state_dict())
        for name, param in plain.named_parameters():
            self.assertTrue(same_bits(masters(model, opt)[name], param.detach()), name)

    def test_errors(self):
        model, opt = make(0)
        before = masters(model, opt)
        bad = model.state_dict()
        bad["fc.weight"] = torch.zeros(3, 3)
        with self.assertRaisesRegex(RuntimeError, "size mismatch for fc.weight"):
            model.load_state_dict(bad)
        self.assertTrue(same_bits(masters(model, opt)["fc.weight"], before["fc.weight"]), "trail untouched")
        # a copy of the model: no optimizer holds its trails
        twin = copy.deepcopy(model)
        with self.assertRaisesRegex(RuntimeError, r"parameter conv.weight \(Conv2d\) is a split bf16 master weight but no live optimizer"):
            twin.state_dict()
        self.assertEqual(bf16_state_dict(twin)["fc.weight"].dtype, torch.bfloat16)
        with self.assertRaisesRegex(RuntimeError, "no live optimizer"):
            twin.load_state_dict(model.state_dict())
        # the optimizer deleted
        del opt
        gc.collect()
        with self.assertRaisesRegex(RuntimeError, "no live optimizer"):
            model.state_dict()


if __name__ == "__main__":
    main()
