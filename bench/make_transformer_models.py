#!/usr/bin/python3
"""Writes the models of the ONNX Runtime side-by-side benchmark (bench/transformers.sh).

usage: make_transformer_models.py OUTDIR [NAME...] [--force] [--cnn-batch N]

Per model, OUTDIR/NAME/ holds:
  model.pt     TorchScript, traced in eval mode under no_grad (so nn.TransformerEncoder and
               nn.MultiheadAttention run as aten::_transformer_encoder_layer_fwd and
               aten::_native_multi_head_attention, the fast paths stock libtorch takes)
  model.onnx   the same weights exported with torch.onnx.export, opset 14; exported with grad
               enabled so the fast-path ops (which have no ONNX symbolic) are replaced by the
               plain computation ONNX Runtime can fuse itself
  inputs/      one NN_name.npy per forward argument, in argument order (float32, C order)
  flops.txt    floating-point operations per forward call (a multiply-add counts 2):
               convolutions, linears and the two attention matmuls; norms, softmax and
               activations are not counted
  model.json   {name, inputs [{name, file, shape, dtype}], flops, description}
Weights are random and seeded: nothing is downloaded. Existing model directories are kept
unless --force.

names: bert_encoder vit_b16_b2 vit_b16_b8 gpt2_stack attention cnn_resnet50
       cnn_mobilenet_v3 cnn_densenet121 cnn_shufflenet, and the convolution suite:
       resnet50_b16 resnet50_b1 mobilenet_v3_large_b8 efficientnet_b0_b8 convnext_tiny_b4
       densenet121_b4 regnet_y_800mf_b8 squeezenet1_1_b8 shufflenet_v2_x1_0_b8 mnasnet1_0_b8
       resnext50_32x4d_b4 googlenet_b8   (default: all)
"""
import argparse
import json
import math
import os
import shutil
import sys
import warnings

import numpy as np
import torch
import torchvision

SEED = 0
ONNX_OPSET = 14


# ---------------------------------------------------------------------------------------------
# Models


def bert_encoder(layers=4):
    def layer():
        return torch.nn.TransformerEncoderLayer(d_model=768, nhead=12, dim_feedforward=3072,
                                                activation="gelu", batch_first=True)

    encoder = torch.nn.TransformerEncoder(layer(), num_layers=layers, enable_nested_tensor=False)
    # TransformerEncoder deep-copies one layer; give every layer weights of its own so that no
    # runtime can share them between layers (the ONNX exporter would merge equal initializers).
    encoder.layers = torch.nn.ModuleList([layer() for _ in range(layers)])
    return encoder


class Gpt2Attention(torch.nn.Module):
    """Causal self-attention written the way Hugging Face's GPT2Attention is."""

    def __init__(self, d_model, heads, max_positions):
        super().__init__()
        self.heads = heads
        self.head_dim = d_model // heads
        self.c_attn = torch.nn.Linear(d_model, 3 * d_model)
        self.c_proj = torch.nn.Linear(d_model, d_model)
        causal = torch.tril(torch.ones(max_positions, max_positions, dtype=torch.bool))
        self.register_buffer("bias", causal.view(1, 1, max_positions, max_positions))
        self.register_buffer("masked_bias", torch.tensor(-1e4))

    def split_heads(self, x):
        b, n, _ = x.shape
        return x.view(b, n, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        causal = self.bias[:, :, :n, :n]
        scores = torch.where(causal, scores, self.masked_bias.to(scores.dtype))
        probs = torch.softmax(scores, dim=-1)
        context = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous().view(b, n, d)
        return self.c_proj(context)


class Gpt2Block(torch.nn.Module):
    def __init__(self, d_model, heads, max_positions):
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(d_model)
        self.attn = Gpt2Attention(d_model, heads, max_positions)
        self.ln_2 = torch.nn.LayerNorm(d_model)
        self.c_fc = torch.nn.Linear(d_model, 4 * d_model)
        self.mlp_proj = torch.nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        ff = self.mlp_proj(torch.nn.functional.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
        return x + ff


class Gpt2Stack(torch.nn.Module):
    """GPT-2-small-sized decoder blocks on hidden states (no embeddings, no LM head)."""

    def __init__(self, blocks=4, d_model=768, heads=12, max_positions=1024):
        super().__init__()
        self.h = torch.nn.ModuleList(
            [Gpt2Block(d_model, heads, max_positions) for _ in range(blocks)])
        self.ln_f = torch.nn.LayerNorm(d_model)

    def forward(self, x):
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


class AttentionCore(torch.nn.Module):
    """softmax(q kᵀ · scale) v on [batch, heads, seq, head_dim] inputs."""

    def forward(self, q, k, v):
        scale = 1.0 / math.sqrt(q.shape[-1])
        return torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * scale, dim=-1) @ v


def vit_b16():
    model = torchvision.models.vit_b_16()
    # torchvision starts the classification head at zero (every output 0 whatever the input);
    # random weights make the outputs, and so the correctness check, depend on the whole model.
    torch.nn.init.normal_(model.heads.head.weight, std=0.02)
    torch.nn.init.normal_(model.heads.head.bias, std=0.02)
    return model


# name -> (builder, [(input name, shape)], description)
def specs(cnn_batch):
    image = lambda b: [("image", (b, 3, 224, 224))]
    return {
        "bert_encoder": (bert_encoder, [("x", (8, 128, 768))],
                         "nn.TransformerEncoder, 4 layers, d 768, 12 heads, ffn 3072, gelu, "
                         "batch_first; batch 8 x 128 tokens"),
        "vit_b16_b2": (vit_b16, image(2), "torchvision vit_b_16 (random head), batch 2"),
        "vit_b16_b8": (vit_b16, image(8), "torchvision vit_b_16 (random head), batch 8"),
        "gpt2_stack": (Gpt2Stack, [("x", (4, 256, 768))],
                       "4 GPT-2-small causal blocks written as Hugging Face does; "
                       "batch 4 x 256 tokens"),
        "attention": (AttentionCore, [("q", (1, 8, 512, 64)), ("k", (1, 8, 512, 64)),
                                      ("v", (1, 8, 512, 64))],
                      "softmax(q k^T scale) v, batch 1, 8 heads, seq 512, head dim 64"),
        "cnn_resnet50": (torchvision.models.resnet50, image(cnn_batch),
                         f"torchvision resnet50, batch {cnn_batch}"),
        "cnn_mobilenet_v3": (torchvision.models.mobilenet_v3_large, image(cnn_batch),
                             f"torchvision mobilenet_v3_large, batch {cnn_batch}"),
        "cnn_densenet121": (torchvision.models.densenet121, image(cnn_batch),
                            f"torchvision densenet121, batch {cnn_batch}"),
        "cnn_shufflenet": (torchvision.models.shufflenet_v2_x1_0, image(cnn_batch),
                           f"torchvision shufflenet_v2_x1_0, batch {cnn_batch}"),
        # The convolution suite (bench/transformers.sh --suite cnn): torchvision models at the
        # batch each is measured at, independent of --cnn-batch.
        **{f"{arch}_b{b}": (getattr(torchvision.models, arch), image(b), f"torchvision {arch}, batch {b}")
           for arch, b in CNN_SUITE},
    }


# (torchvision architecture, batch) of the convolution suite.
CNN_SUITE = [("resnet50", 16), ("resnet50", 1), ("mobilenet_v3_large", 8), ("efficientnet_b0", 8),
             ("convnext_tiny", 4), ("densenet121", 4), ("regnet_y_800mf", 8), ("squeezenet1_1", 8),
             ("shufflenet_v2_x1_0", 8),
             # measured beside them, never tuned on
             ("mnasnet1_0", 8), ("resnext50_32x4d", 4), ("googlenet", 8)]


# ---------------------------------------------------------------------------------------------
# FLOP count: forward hooks on the modules that do the arithmetic, run on the plain (non
# fast-path) computation.


def count_flops(model, inputs):
    total = [0]

    def conv(mod, args, out):
        per_output = 2 * (mod.in_channels // mod.groups) * math.prod(mod.kernel_size)
        total[0] += per_output * out.numel()

    def linear(mod, args, out):
        total[0] += 2 * mod.in_features * out.numel()

    def mha(mod, args, out):
        # Hooks see positional arguments only (torchvision passes query/key/value by keyword):
        # the shape comes from the output, the key length from the key when it was positional,
        # else it is self-attention's.
        attn = out[0] if mod.batch_first else out[0].transpose(0, 1)
        b, n, e = attn.shape
        s = n
        if len(args) > 1:
            s = args[1].shape[1 if mod.batch_first else 0]
        # in-projection (q, k, v), out-projection, q kᵀ and probs v; the module calls its
        # out_proj functionally, so no Linear hook sees it.
        total[0] += 2 * b * n * e * 3 * e + 2 * b * n * e * e + 4 * b * n * s * e

    def gpt2_attention(mod, args, out):
        b, n, d = args[0].shape
        total[0] += 4 * b * n * n * d

    def attention_core(mod, args, out):
        q, k = args[0], args[1]
        total[0] += 4 * q.shape[0] * q.shape[1] * q.shape[2] * k.shape[2] * q.shape[3]

    handles = []
    for mod in model.modules():
        if isinstance(mod, torch.nn.Conv2d):
            handles.append(mod.register_forward_hook(conv))
        elif isinstance(mod, torch.nn.MultiheadAttention):
            handles.append(mod.register_forward_hook(mha))
        elif isinstance(mod, torch.nn.Linear) and not isinstance(
                mod, torch.nn.modules.linear.NonDynamicallyQuantizableLinear):
            handles.append(mod.register_forward_hook(linear))
        elif isinstance(mod, Gpt2Attention):
            handles.append(mod.register_forward_hook(gpt2_attention))
        elif isinstance(mod, AttentionCore):
            handles.append(mod.register_forward_hook(attention_core))
    # Grad enabled: the transformer fast paths are skipped, so the submodules' hooks fire.
    with torch.enable_grad():
        model(*inputs)
    for h in handles:
        h.remove()
    return total[0]


# ---------------------------------------------------------------------------------------------


def save_npy_inputs(directory, names, tensors):
    os.makedirs(directory, exist_ok=True)
    files = []
    for i, (name, t) in enumerate(zip(names, tensors)):
        file = f"{i:02d}_{name}.npy"
        np.save(os.path.join(directory, file), np.ascontiguousarray(t.numpy()))
        files.append(file)
    return files


def write_model(outdir, name, builder, input_spec, description):
    torch.manual_seed(SEED)
    model = builder().eval()
    generator = torch.Generator().manual_seed(SEED + 1)
    names = [n for n, _ in input_spec]
    inputs = [torch.randn(*shape, generator=generator) for _, shape in input_spec]

    tmp = os.path.join(outdir, f".{name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        traced = torch.jit.trace(model, tuple(inputs), check_trace=False)
    torch.jit.save(traced, os.path.join(tmp, "model.pt"))
    kinds = {n.kind() for n in traced.inlined_graph.nodes()}
    fast_paths = sorted(k for k in kinds if k in ("aten::_transformer_encoder_layer_fwd",
                                                  "aten::_native_multi_head_attention"))

    # Grad enabled (parameters require grad): the modules take their plain path, which
    # torch.onnx can export; the weights are the same tensors.
    with torch.enable_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        torch.onnx.export(model, tuple(inputs), os.path.join(tmp, "model.onnx"),
                          opset_version=ONNX_OPSET, input_names=names, output_names=["out"],
                          do_constant_folding=True)

    flops = count_flops(model, inputs)
    files = save_npy_inputs(os.path.join(tmp, "inputs"), names, inputs)
    with open(os.path.join(tmp, "flops.txt"), "w") as f:
        f.write(f"{flops}\n")
    meta = {
        "name": name,
        "description": description,
        "inputs": [{"name": n, "file": f"inputs/{f}", "shape": list(t.shape), "dtype": "float32"}
                   for n, f, t in zip(names, files, inputs)],
        "flops": flops,
        "torchscript_fast_paths": fast_paths,
        "onnx_opset": ONNX_OPSET,
        "seed": SEED,
    }
    with open(os.path.join(tmp, "model.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")

    final = os.path.join(outdir, name)
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    return meta


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("outdir")
    parser.add_argument("names", nargs="*")
    parser.add_argument("--force", action="store_true", help="rewrite existing model directories")
    parser.add_argument("--cnn-batch", type=int, default=8, help="batch of the CNN rows (default 8)")
    args = parser.parse_args()

    table = specs(args.cnn_batch)
    names = args.names or list(table)
    unknown = [n for n in names if n not in table]
    if unknown:
        parser.error(f"unknown model {', '.join(unknown)}; known: {' '.join(table)}")
    os.makedirs(args.outdir, exist_ok=True)
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    failed = []
    for name in names:
        final = os.path.join(args.outdir, name)
        if not args.force and all(os.path.exists(os.path.join(final, f))
                                  for f in ("model.pt", "model.onnx", "model.json", "flops.txt")):
            print(f"{name}: kept {final}", file=sys.stderr)
            continue
        builder, input_spec, description = table[name]
        try:
            meta = write_model(args.outdir, name, builder, input_spec, description)
        except Exception as e:  # the other models are still written
            print(f"{name}: failed: {type(e).__name__}: {e}", file=sys.stderr)
            shutil.rmtree(os.path.join(args.outdir, f".{name}.tmp"), ignore_errors=True)
            failed.append(name)
            continue
        fast = ", ".join(meta["torchscript_fast_paths"]) or "none"
        print(f"{name}: {meta['flops'] / 1e9:.2f} GFLOP per call, fast paths in model.pt: {fast}",
              file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
