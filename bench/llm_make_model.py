#!/usr/bin/python3
"""Writes a random-weight TinyLlama-1.1B-shaped checkpoint (hidden 2048, 22 layers, 32 heads /
4 KV heads, intermediate 5632, vocab 32000) in Hugging Face layout, bf16, for
bench/llm_acceptance.sh. Seeded; about 2.2 GB.

--moe writes a Qwen3-MoE-shaped mixture instead, a scaled-down Qwen3-30B-A3B: hidden 1024, 16
layers, 16 heads / 4 KV heads of 64 with q/k RMSNorm, 64 experts of intermediate 512 with 8
chosen per token (norm_topk_prob), vocab 32000; 1.72 B weights, 0.28 B active a token; about
3.4 GB.

Usage: llm_make_model.py OUTDIR [--layers N] [--moe]
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


MOE_CONFIG = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 1024,
              "intermediate_size": 3072, "num_hidden_layers": 16, "num_attention_heads": 16,
              "num_key_value_heads": 4, "head_dim": 64, "vocab_size": 32000, "max_position_embeddings": 4096,
              "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": False,
              "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2, "num_experts": 64,
              "num_experts_per_tok": 8, "moe_intermediate_size": 512, "norm_topk_prob": True,
              "decoder_sparse_step": 1, "mlp_only_layers": []}


def moe_shapes(cfg):
    H, V, hd, E, I = (cfg["hidden_size"], cfg["vocab_size"], cfg["head_dim"], cfg["num_experts"],
                      cfg["moe_intermediate_size"])
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    shapes = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,), "lm_head.weight": (V, H)}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        shapes.update({p + "self_attn.q_proj.weight": (q, H), p + "self_attn.k_proj.weight": (kv, H),
                       p + "self_attn.v_proj.weight": (kv, H), p + "self_attn.o_proj.weight": (H, q),
                       p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,),
                       p + "input_layernorm.weight": (H,), p + "post_attention_layernorm.weight": (H,),
                       p + "mlp.gate.weight": (E, H)})
        for e in range(E):
            x = p + f"mlp.experts.{e}."
            shapes.update({x + "gate_proj.weight": (I, H), x + "up_proj.weight": (I, H), x + "down_proj.weight": (H, I)})
    return shapes


def main():
    out = sys.argv[1]
    moe = "--moe" in sys.argv
    cfg = dict(MOE_CONFIG if moe else CONFIG)
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
    if moe:
        shapes = moe_shapes(cfg)
    # In the order the safetensors library (and so Hugging Face) writes: by name. A layer's
    # k_proj, o_proj, q_proj, v_proj then do not lie together, as in the checkpoints users have.
    shapes = dict(sorted(shapes.items()))
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
