#!/usr/bin/python3
"""Writes a random-weight TinyLlama-1.1B-shaped checkpoint (hidden 2048, 22 layers, 32 heads /
4 KV heads, intermediate 5632, vocab 32000) in Hugging Face layout, bf16, for
bench/llm_acceptance.sh. Seeded; about 2.2 GB.

Usage: llm_make_model.py OUTDIR [--layers N]
"""

import json
import os
import struct
import sys

import torch

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
          "intermediate_size": 5632, "num_hidden_layers": 22, "num_attention_heads": 32,
          "num_key_value_heads": 4, "vocab_size": 32000, "max_position_embeddings": 4096,
          "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False,
          "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2}


def main():
    out = sys.argv[1]
    cfg = dict(CONFIG)
    if "--layers" in sys.argv:
        cfg["num_hidden_layers"] = int(sys.argv[sys.argv.index("--layers") + 1])
    os.makedirs(out, exist_ok=True)
    gen = torch.Generator().manual_seed(7)
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd = H // cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"] * hd
    shapes = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,), "lm_head.weight": (V, H)}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        shapes.update({p + "self_attn.q_proj.weight": (H, H), p + "self_attn.k_proj.weight": (kv, H),
                       p + "self_attn.v_proj.weight": (kv, H), p + "self_attn.o_proj.weight": (H, H),
                       p + "mlp.gate_proj.weight": (I, H), p + "mlp.up_proj.weight": (I, H),
                       p + "mlp.down_proj.weight": (H, I), p + "input_layernorm.weight": (H,),
                       p + "post_attention_layernorm.weight": (H,)})
    header, offset = {}, 0
    for name, shape in shapes.items():
        n = 2 * int(torch.tensor(shape).prod())
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(os.path.join(out, "model.safetensors.tmp"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name, shape in shapes.items():
            if len(shape) == 1:
                t = torch.ones(shape)
            else:
                t = torch.randn(shape, generator=gen) * (shape[1] ** -0.5)
            f.write(t.to(torch.bfloat16).view(torch.int16).numpy().tobytes())
    os.replace(os.path.join(out, "model.safetensors.tmp"), os.path.join(out, "model.safetensors"))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)


if __name__ == "__main__":
    main()
