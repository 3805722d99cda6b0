"""Data-parallel bf16 training with split master weights and fused steps, one process per rank:

    ipex-launch --nnodes 1 --nprocs-per-node 2 -- python3 docs/examples/train_ddp.py --steps 50
    GLOO_SOCKET_IFNAME=eth0 ipex-launch --nnodes 2 --nprocs-per-node 2 --hostfile hosts \\
        -- python3 train_ddp.py --optimizer adamw

ipex-launch sets MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE, so init_process_group needs no
arguments. Every rank builds the same model (same seed), ipex_tool.optimize splits its weights,
ipex_tool.distributed.data_parallel wraps it in torch's DistributedDataParallel; each step a rank
trains on its slice of a global batch. The data is synthetic with learnable structure (each
class a fixed pattern plus noise). With --save DIR each rank writes its parameters (bf16 tops,
int16 trails, the fp32 masters) to DIR/rank<R>.pt; tests/python/test_training_ddp.py checks that
they are identical across ranks and equal to one process's training on the averaged gradients.
"""

import argparse
import datetime
import os

import torch
import torch.distributed as dist

import ipex_tool
import ipex_tool.distributed

CLASSES = 10
IMAGE = (3, 12, 12)


class SmallNet(torch.nn.Module):
    """Conv and linears (split bf16 weights) and a LayerNorm (fp32 parameters: their own gradient
    bucket; autocast in torch 1.13 leaves layer_norm's input bf16, hence the cast)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(IMAGE[0], 8, 3, padding=1)
        self.fc1 = torch.nn.Linear(8 * IMAGE[1] * IMAGE[2] // 4, 32)
        self.norm = torch.nn.LayerNorm(32)
        self.fc2 = torch.nn.Linear(32, CLASSES)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)
        return self.fc2(torch.relu(self.norm(self.fc1(x.flatten(1)).float())))


def make_model(seed):
    torch.manual_seed(seed)
    return SmallNet()


def make_optimizer(name, params):
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-4)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=2e-3, weight_decay=1e-2)
    if name == "lamb":
        return ipex_tool.optim.Lamb(params, lr=2e-3, weight_decay=1e-2)
    raise ValueError(f"unknown optimizer {name!r}")


def global_batch(step, size, seed):
    """Step ``step``'s images and labels, the same on every rank."""
    patterns = torch.randn((CLASSES, *IMAGE), generator=torch.Generator().manual_seed(seed))
    generator = torch.Generator().manual_seed(seed * 100003 + step + 1)
    labels = torch.randint(0, CLASSES, (size,), generator=generator)
    images = patterns[labels] + 0.8 * torch.randn((size, *IMAGE), generator=generator)
    return images, labels


def shard(tensor, rank, world):
    """Rank ``rank``'s contiguous slice of a global batch (the batch divides by the world size)."""
    per_rank = tensor.shape[0] // world
    return tensor[rank * per_rank:(rank + 1) * per_rank]


def loss_of(model, images, labels):
    with torch.cpu.amp.autocast(dtype=torch.bfloat16):
        logits = model(images)
    return torch.nn.functional.cross_entropy(logits.float(), labels)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--global-batch", type=int, default=32, help="images per step over all ranks")
    parser.add_argument("--optimizer", choices=["sgd", "adamw", "lamb"], default="sgd")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", metavar="DIR", help="write this rank's parameters to DIR/rank<R>.pt")
    args = parser.parse_args()

    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.global_batch % world:
        parser.error(f"--global-batch {args.global_batch} does not divide by the world size {world}")

    model = make_model(args.seed)
    model, optimizer = ipex_tool.optimize(model, optimizer=make_optimizer(args.optimizer, model.parameters()),
                                          dtype=torch.bfloat16)
    ddp = ipex_tool.distributed.data_parallel(model, optimizer)
    for step in range(args.steps):
        images, labels = global_batch(step, args.global_batch, args.seed)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(ddp, shard(images, rank, world), shard(labels, rank, world))
        loss.backward()
        optimizer.step()
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print(f"step {step}: loss {loss.item():.4f} (rank 0's slice)", flush=True)

    if args.save:
        os.makedirs(args.save, exist_ok=True)
        tops = {name: p.detach().clone() for name, p in model.named_parameters()}
        trails = {name: optimizer.state[p]["trail"].clone() for name, p in model.named_parameters()
                  if "trail" in optimizer.state[p]}
        torch.save({"tops": tops, "trails": trails, "state_dict": model.state_dict(), "world": world},
                   os.path.join(args.save, f"rank{rank}.pt"))
    # Tear down while the interpreter is whole: torch 1.13's gloo worker threads may still hold
    # tensors whose release needs the GIL, and a group destroyed at exit can hang on them.
    dist.barrier()
    del ddp
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
