#!/usr/bin/python3
"""Writes a GGUF (v3) file from a Hugging Face decoder directory (config.json and
model.safetensors of LlamaForCausalLM, MistralForCausalLM without a sliding window,
MixtralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM,
Phi3ForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM), so llama.cpp runs the same weights as
ipex-tool in bench/llm_compare.py, and the tests have GGUF files made by the format's own
conversion rules.

Written from the GGUF format as llama.cpp documents it: header, metadata, tensor infos (dims
innermost first), data aligned to 32 bytes; names, keys and tensor forms as llama.cpp's converter
writes them. q_proj/k_proj rows are permuted from Hugging Face's rotate-half order to the
interleaved pairs llama.cpp's "llama" architecture (Mixtral too) rotates (the others keep them).
Gemma: norms stored as 1 + w, lm_head dropped, post_attention_norm / ffn_norm / post_ffw_norm,
soft caps and the sliding window as keys. Phi-3: attn_qkv and a double-width ffn_up as stored,
rope dimension count, longrope's lists as rope_factors_long/short tensors with the original
length and attention factor. Mixtures: each layer's experts stacked into 3-D
ffn_{gate,up,down}_exps [experts, rows, columns], the router ffn_gate_inp, Qwen2-MoE's shared
expert ffn_*_shexp and its gate ffn_gate_inp_shexp (squeezed to 1-D), expert_count,
expert_used_count, expert_feed_forward_length, expert_shared_feed_forward_length (a layer of
mlp_only_layers keeps dense ffn_gate/up/down, which llama.cpp itself would not load). A model
llama.cpp would run differently from its config (values its loader fixes: check_representable) is
refused. Norms, routers and rope lists stay F32; every other matrix is TYPE: f32, f16, bf16, q8_0
(blocks of 32: fp16 scale amax/127, int8 round-to-nearest), q4_0 (blocks of 32: fp16 scale
d = v/-8 for the value v of largest magnitude, nibbles min(15, trunc(x/d + 8.5)), element j in the
low nibble and j + 16 in the high one) or q4_1 (fp16 d = (max - min)/15 and m = min, nibbles
min(15, trunc((x - min)/d + 0.5))), or the K types q4_K, q5_K, q6_K (blocks of 256 in the
format's layout, scales by round-to-nearest rather than llama.cpp's search: q4_k, q5_k, q6_k).
The tokenizer is the directory's byte-level BPE tokenizer.json as "gpt2", else its SentencePiece
tokenizer.model as "llama" (as llama.cpp's converter writes them), else a placeholder of the config's size ("llama" model, <unk> <s> </s>
then byte and filler tokens): the benches feed token ids, never text.

Usage: gguf_write.py HF_DIR OUT.gguf [--type f32|f16|bf16|q8_0|q4_0|q4_1|q4_K|q5_K|q6_K]
As a module: write_gguf(HF_DIR, OUT, kind) returns the weights as the file holds them, in
Hugging Face names and order (the rounding of each type applied): a test's reference.
"""

import json
import math
import os
import struct
import sys

import numpy as np
import torch

GGML = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q8_0": 8, "q4_K": 12, "q5_K": 13, "q6_K": 14, "bf16": 30}
# the K types as llama.cpp names the files they make up: Q4_K_M, Q5_K_M, Q6_K
FILE_TYPE = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q8_0": 7, "q4_K": 15, "q5_K": 17, "q6_K": 18, "bf16": 32}
QUANTIZED = ("q8_0", "q4_0", "q4_1", "q4_K", "q5_K", "q6_K")
BLOCK = {"q4_K": 256, "q5_K": 256, "q6_K": 256}  # elements per block; 32 for the other quantized types
ALIGN = 32
U32, I32, F32, BOOL, STRING, ARRAY, U64 = 4, 5, 6, 7, 8, 9, 10


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        dtypes = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            b, e = info["data_offsets"]
            f.seek(base + b)
            raw = bytearray(f.read(e - b))
            out[name] = torch.frombuffer(raw, dtype=dtypes[info["dtype"]]).reshape(info["shape"]).clone()
        return out


def permute(w, heads):
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def permute_back(w, heads):
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def q8_0(x):
    """(bytes, dequantized values)."""
    b = x.float().reshape(-1, 32).numpy().astype(np.float32)
    amax = np.abs(b).max(1, keepdims=True)
    d = amax / np.float32(127.0)
    inv = np.where(d > 0, np.float32(1.0) / np.where(d > 0, d, 1), 0).astype(np.float32)
    v = b * inv
    t = np.trunc(v)
    q = np.clip(np.where(np.abs(v - t) >= 0.5, t + np.sign(v), t), -128, 127).astype(np.int8)  # roundf
    out = np.zeros((b.shape[0], 34), np.uint8)
    dh = d.astype(np.float16)
    out[:, :2] = dh.view(np.uint8)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes(), torch.from_numpy(q.astype(np.float32) * dh.astype(np.float32)).reshape(x.shape)


def q4_0(x):
    b = x.float().reshape(-1, 32).numpy().astype(np.float32)
    idx = np.abs(b).argmax(1)
    vmax = b[np.arange(b.shape[0]), idx][:, None]
    d = vmax / np.float32(-8.0)
    inv = np.where(d != 0, np.float32(1.0) / np.where(d != 0, d, 1), 0).astype(np.float32)
    q = np.minimum(15, np.trunc(b * inv + np.float32(8.5))).astype(np.uint8)
    out = np.zeros((b.shape[0], 18), np.uint8)
    dh = d.astype(np.float16)
    out[:, :2] = dh.view(np.uint8)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    deq = (q.astype(np.float32) - 8) * dh.astype(np.float32)
    return out.tobytes(), torch.from_numpy(deq).reshape(x.shape)


def q4_1(x):
    """llama.cpp's quantize_row_q4_1_ref: d = (max - min) / 15, m = min, nibbles
    min(15, trunc((x - min) / d + 0.5)); the file's values q d + m in fp32."""
    b = x.float().reshape(-1, 32).numpy().astype(np.float32)
    lo, hi = b.min(1, keepdims=True), b.max(1, keepdims=True)
    d = ((hi - lo) / np.float32(15.0)).astype(np.float32)
    inv = np.where(d != 0, np.float32(1.0) / np.where(d != 0, d, 1), 0).astype(np.float32)
    q = np.minimum(15, np.trunc((b - lo) * inv + np.float32(0.5))).astype(np.uint8)
    out = np.zeros((b.shape[0], 20), np.uint8)
    dh, mh = d.astype(np.float16), lo.astype(np.float16)
    out[:, :2] = dh.view(np.uint8)
    out[:, 2:4] = mh.view(np.uint8)
    out[:, 4:] = q[:, :16] | (q[:, 16:] << 4)
    deq = q.astype(np.float32) * dh.astype(np.float32) + mh.astype(np.float32)
    return out.tobytes(), torch.from_numpy(deq).reshape(x.shape)


def _k_scales(scale, the_min):
    """q4_K / q5_K: the per-block fp16 d and dmin and the 6-bit sc and m of 8 sub-blocks
    (round-to-nearest against the largest), packed into 12 bytes as llama.cpp packs them."""
    d = (scale.max(1, keepdims=True) / np.float32(63)).astype(np.float16)
    dmin = (the_min.max(1, keepdims=True) / np.float32(63)).astype(np.float16)
    df, mf = d.astype(np.float32), dmin.astype(np.float32)
    sc = np.clip(np.rint(np.divide(scale, df, out=np.zeros_like(scale), where=df > 0)), 0, 63).astype(np.uint8)
    m = np.clip(np.rint(np.divide(the_min, mf, out=np.zeros_like(the_min), where=mf > 0)), 0, 63).astype(np.uint8)
    packed = np.zeros((scale.shape[0], 12), np.uint8)
    packed[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
    packed[:, 4:8] = m[:, 0:4] | ((m[:, 4:8] >> 4) << 6)
    packed[:, 8:12] = (sc[:, 4:8] & 0xF) | ((m[:, 4:8] & 0xF) << 4)
    return d, dmin, sc, m, packed


def _q45_k(x, bits):
    """q4_K (bits 4) / q5_K (bits 5): blocks of 256 = 8 sub-blocks of 32, each w = d sc q - dmin m
    with q in 0..2^bits - 1. Not llama.cpp's iterative scale search: per sub-block min (at most 0)
    and max, rounded to nearest; the layout is the format's. (bytes, the fp32 values held)."""
    top = np.float32(2 ** bits - 1)
    b = x.float().reshape(-1, 8, 32).numpy().astype(np.float32)
    lo = np.minimum(b.min(2), 0)
    hi = np.maximum(b.max(2), lo)
    d, dmin, sc, m, packed = _k_scales(((hi - lo) / top).astype(np.float32), (-lo).astype(np.float32))
    d1 = d.astype(np.float32) * sc.astype(np.float32)   # [blocks, 8], exact products
    m1 = dmin.astype(np.float32) * m.astype(np.float32)
    v = (b + m1[:, :, None]) / np.where(d1 > 0, d1, 1)[:, :, None]
    q = np.where(d1[:, :, None] > 0, np.clip(np.rint(v), 0, top), 0).astype(np.uint8)  # [blocks, 8, 32]
    low = q & 0xF
    qs = (low[:, 0::2, :] | (low[:, 1::2, :] << 4)).reshape(-1, 128)  # chunk c: sub-block 2c low, 2c+1 high
    parts = [d.view(np.uint8), dmin.view(np.uint8), packed]
    if bits == 5:
        high = (q >> 4) & 1  # bit j of byte l: sub-block j's element l
        qh = np.zeros((q.shape[0], 32), np.uint8)
        for j in range(8):
            qh |= (high[:, j, :] << j).astype(np.uint8)
        parts.append(qh)
    parts.append(qs)
    out = np.concatenate(parts, axis=1)
    deq = d1[:, :, None] * q.astype(np.float32) - m1[:, :, None]
    return out.tobytes(), torch.from_numpy(deq.astype(np.float32)).reshape(x.shape)


def q4_k(x):
    return _q45_k(x, 4)


def q5_k(x):
    return _q45_k(x, 5)


def q6_k(x):
    """q6_K: blocks of 256 = 16 sub-blocks of 16, w = d sc (q - 32) with an int8 sc per sub-block and
    q in 0..63 (round-to-nearest against the largest magnitude; the format's layout: 128 bytes of
    low nibbles, 64 of high bit pairs, 16 scales, fp16 d). (bytes, the fp32 values held)."""
    b = x.float().reshape(-1, 16, 16).numpy().astype(np.float32)
    s = (np.abs(b).max(2) / np.float32(31)).astype(np.float32)  # [blocks, 16]
    d = (s.max(1, keepdims=True) / np.float32(127)).astype(np.float16)
    df = d.astype(np.float32)
    sc = np.clip(np.rint(np.divide(s, df, out=np.zeros_like(s), where=df > 0)), -128, 127).astype(np.int8)
    d1 = df * sc.astype(np.float32)
    q = np.where(d1[:, :, None] != 0,
                 np.clip(np.rint(b / np.where(d1 != 0, d1, 1)[:, :, None]), -32, 31), 0).astype(np.int32) + 32
    q = q.reshape(-1, 2, 4, 32).astype(np.uint8)  # [blocks, half, g, l]: element 128 half + 32 g + l
    ql = np.concatenate([q[:, :, 0] & 0xF | ((q[:, :, 2] & 0xF) << 4),
                         q[:, :, 1] & 0xF | ((q[:, :, 3] & 0xF) << 4)], axis=2).reshape(-1, 128)
    qh = ((q[:, :, 0] >> 4) | ((q[:, :, 1] >> 4) << 2) | ((q[:, :, 2] >> 4) << 4) | ((q[:, :, 3] >> 4) << 6))
    out = np.concatenate([ql, qh.reshape(-1, 64), sc.view(np.uint8), d.view(np.uint8)], axis=1)
    deq = d1.reshape(-1, 256 // 16, 1) * (q.reshape(-1, 16, 16).astype(np.float32) - 32)
    return out.tobytes(), torch.from_numpy(deq.astype(np.float32)).reshape(x.shape)


def encode(t, kind):
    """(bytes, the values the file holds as fp32)."""
    if kind == "f32":
        return t.float().contiguous().numpy().tobytes(), t.float()
    if kind == "f16":
        return t.half().contiguous().numpy().tobytes(), t.half().float()
    if kind == "bf16":
        return t.bfloat16().contiguous().view(torch.int16).numpy().tobytes(), t.bfloat16().float()
    return {"q8_0": q8_0, "q4_0": q4_0, "q4_1": q4_1, "q4_K": q4_k, "q5_K": q5_k, "q6_K": q6_k}[kind](t)


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, kind, value):
    out = gguf_string(key) + struct.pack("<I", kind)
    if kind == U32:
        return out + struct.pack("<I", value)
    if kind == I32:
        return out + struct.pack("<i", value)
    if kind == F32:
        return out + struct.pack("<f", value)
    if kind == BOOL:
        return out + struct.pack("<?", value)
    if kind == STRING:
        return out + gguf_string(value)
    elem, items = value
    out += struct.pack("<IQ", elem, len(items))
    fmt = {I32: "<i", F32: "<f"}
    return out + b"".join(gguf_string(v) if elem == STRING else struct.pack(fmt[elem], v) for v in items)


PRE_TOKENIZERS = {
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+":
        "llama-bpe",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+":
        "qwen2",
}


def byte_level_tokenizer(src, vocab_size):
    """A byte-level BPE tokenizer.json as GGUF's "gpt2" tokenizer (tokens by id, merges as "a b",
    the pre-tokenizer named by its split pattern, added special tokens as control), or None."""
    path = os.path.join(src, "tokenizer.json")
    if not os.path.exists(path):
        return None
    tok = json.load(open(path, encoding="utf-8"))
    model = tok.get("model", {})
    pre = tok.get("pre_tokenizer") or {}
    splits = [p for p in pre.get("pretokenizers", []) if p.get("type") == "Split"]
    if model.get("type") != "BPE" or not splits:
        return None
    name = PRE_TOKENIZERS.get(splits[0]["pattern"].get("Regex"))
    if name is None:
        return None
    tokens = [None] * vocab_size
    for t, i in model["vocab"].items():
        if i < vocab_size:
            tokens[i] = t
    types = [1] * vocab_size
    for a in tok.get("added_tokens", []):
        if a["id"] < vocab_size:
            tokens[a["id"]] = a["content"]
            types[a["id"]] = 3 if a.get("special") else 4
    tokens = [t if t is not None else f"[PAD{i}]" for i, t in enumerate(tokens)]
    merges = [" ".join(m) if isinstance(m, list) else m for m in model.get("merges", [])]
    add_bos = (tok.get("post_processor") or {}).get("type") == "TemplateProcessing"
    return [kv("tokenizer.ggml.model", STRING, "gpt2"), kv("tokenizer.ggml.pre", STRING, name),
            kv("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)), kv("tokenizer.ggml.token_type", ARRAY, (I32, types)),
            kv("tokenizer.ggml.merges", ARRAY, (STRING, merges)), kv("tokenizer.ggml.add_bos_token", BOOL, add_bos)]


def sentencepiece_tokenizer(src, vocab_size):
    """tokenizer.model (SentencePiece) as GGUF's "llama" tokenizer, as llama.cpp's converter writes
    it: pieces, scores and types by id (unknown 2, control 3, unused 5, byte 6, else normal 1;
    ids past the model [PADn], unused, score -10000), add_space_prefix from the model's dummy
    prefix, add_bos/add_eos from tokenizer_config.json when it says; or None."""
    path = os.path.join(src, "tokenizer.model")
    if not os.path.exists(path):
        return None
    import sentencepiece  # only for files with a SentencePiece model
    sp = sentencepiece.SentencePieceProcessor(model_file=path)
    tokens, scores, types = [], [], []
    for i in range(vocab_size):
        if i >= sp.vocab_size():
            tokens.append(f"[PAD{i}]")
            scores.append(-10000.0)
            types.append(5)
            continue
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        types.append(2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 5 if sp.is_unused(i) else
                     6 if sp.is_byte(i) else 1)
    # The dummy prefix shows as a leading space mark on any text (the model proto needs protobuf).
    space_prefix = sp.encode("x", out_type=str)[0].startswith("\u2581")
    meta = [kv("tokenizer.ggml.model", STRING, "llama"), kv("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
            kv("tokenizer.ggml.scores", ARRAY, (F32, scores)), kv("tokenizer.ggml.token_type", ARRAY, (I32, types)),
            kv("tokenizer.ggml.add_space_prefix", BOOL, space_prefix)]
    if sp.unk_id() >= 0:
        meta.append(kv("tokenizer.ggml.unknown_token_id", U32, sp.unk_id()))
    if sp.pad_id() >= 0:
        meta.append(kv("tokenizer.ggml.padding_token_id", U32, sp.pad_id()))
    config = os.path.join(src, "tokenizer_config.json")
    tc = json.load(open(config, encoding="utf-8")) if os.path.exists(config) else {}
    for key in ("add_bos_token", "add_eos_token"):
        if isinstance(tc.get(key), bool):
            meta.append(kv("tokenizer.ggml." + key, BOOL, tc[key]))
    if isinstance(tc.get("chat_template"), str):
        meta.append(kv("tokenizer.chat_template", STRING, tc["chat_template"]))
    return meta


def first(ids, fallback):
    if isinstance(ids, list):
        return ids[0] if ids else fallback
    return fallback if ids is None else ids


ARCHES = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "llama", "MixtralForCausalLM": "llama",
          "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3", "Gemma2ForCausalLM": "gemma2",
          "Gemma3ForCausalLM": "gemma3", "Phi3ForCausalLM": "phi3", "Qwen2MoeForCausalLM": "qwen2moe",
          "Qwen3MoeForCausalLM": "qwen3moe"}
TOP = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
       "lm_head.weight": "output.weight"}
# (Hugging Face expert name "experts.E.<leaf>" under a block, GGUF stack) per architecture
EXPERTS = {"llama": {"w1": "ffn_gate_exps", "w3": "ffn_up_exps", "w2": "ffn_down_exps"},
           "qwen2moe": {"gate_proj": "ffn_gate_exps", "up_proj": "ffn_up_exps", "down_proj": "ffn_down_exps"}}
EXPERTS["qwen3moe"] = EXPERTS["qwen2moe"]


def layer_names(arch):
    """Hugging Face module -> GGUF name inside a layer, as llama.cpp's tensor map gives them."""
    t = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
         "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
         "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
         "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
         "block_sparse_moe.gate": "ffn_gate_inp", "mlp.gate": "ffn_gate_inp",
         "mlp.shared_expert.gate_proj": "ffn_gate_shexp", "mlp.shared_expert.up_proj": "ffn_up_shexp",
         "mlp.shared_expert.down_proj": "ffn_down_shexp", "mlp.shared_expert_gate": "ffn_gate_inp_shexp"}
    if arch in ("gemma2", "gemma3"):
        t.update({"post_attention_layernorm": "post_attention_norm", "pre_feedforward_layernorm": "ffn_norm",
                  "post_feedforward_layernorm": "post_ffw_norm"})
    if arch == "phi3":  # fused, kept as Hugging Face stores them (ffn_up is gate | up)
        t.update({"self_attn.qkv_proj": "attn_qkv", "mlp.gate_up_proj": "ffn_up"})
    return t


def refuse(why):
    sys.exit("gguf_write.py: " + why)


def check_representable(cfg, arch):
    """Refuses what llama.cpp's converter would write into a file that runs another model:
    values its loader fixes instead of reading (Gemma's attention scale, sliding pattern and
    local rotary base; the mixtures' renormalization), a lm_head Gemma's converter drops."""
    if cfg.get("sliding_window") and arch == "llama":
        refuse("sliding_window models are not written (llama.cpp's llama architecture has none)")
    if arch in ("gemma2", "gemma3"):
        layers, H, heads = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"]
        head_dim = cfg.get("head_dim", H // heads)
        scale = H // heads if layers == (46 if arch == "gemma2" else 62) else head_dim
        if cfg.get("query_pre_attn_scalar", head_dim) != scale:
            refuse(f"query_pre_attn_scalar {cfg['query_pre_attn_scalar']}: llama.cpp's {arch} scales by {scale}")
        if not cfg.get("tie_word_embeddings", True):
            refuse(f"{arch} with its own lm_head: llama.cpp's converter drops it (tied embeddings)")
        if arch == "gemma2" and cfg.get("rope_theta", 10000.0) != 10000.0:
            refuse("gemma2 with rope_theta other than 10000: llama.cpp's converter does not write it")
        if arch == "gemma3":
            if cfg.get("rope_local_base_freq", 10000.0) != 10000.0:
                refuse("rope_local_base_freq other than 10000: llama.cpp's gemma3 fixes it")
            pattern = [(l + 1) % 6 != 0 for l in range(layers)]
            types = cfg.get("layer_types")
            stated = ([t == "sliding_attention" for t in types] if types else
                      [(l + 1) % cfg.get("sliding_window_pattern", 6) != 0 for l in range(layers)])
            if cfg.get("sliding_window") and stated != pattern:
                refuse("sliding layers other than five in six: llama.cpp's gemma3 fixes the pattern")
            if cfg.get("attn_logit_softcapping"):
                refuse("gemma3 with attn_logit_softcapping: llama.cpp's converter refuses it")
    if arch == "qwen2moe" and cfg.get("norm_topk_prob"):
        refuse("qwen2moe with norm_topk_prob: llama.cpp's qwen2moe does not renormalize")
    if arch == "qwen3moe" and not cfg.get("norm_topk_prob", True):
        refuse("qwen3moe without norm_topk_prob: llama.cpp's qwen3moe renormalizes")


def arch_metadata(cfg, arch, head_dim):
    """The architecture's own keys beyond the common ones."""
    meta, p = [], arch + "."
    if arch in ("gemma2", "gemma3"):
        if arch == "gemma2" or cfg.get("final_logit_softcapping"):
            meta.append(kv(p + "final_logit_softcapping", F32, cfg.get("final_logit_softcapping") or 0.0))
        if arch == "gemma2":
            meta.append(kv(p + "attn_logit_softcapping", F32, cfg.get("attn_logit_softcapping") or 0.0))
        if cfg.get("sliding_window"):
            meta.append(kv(p + "attention.sliding_window", U32, cfg["sliding_window"]))
        rs = cfg.get("rope_scaling") or {}
        if arch == "gemma3" and rs.get("rope_type", rs.get("type")) == "linear":
            meta += [kv(p + "rope.scaling.type", STRING, "linear"), kv(p + "rope.scaling.factor", F32, rs["factor"])]
    if arch == "phi3":
        meta.append(kv(p + "attention.sliding_window", U32, cfg.get("sliding_window") or 0))
        rs = cfg.get("rope_scaling") or {}
        orig = rs.get("original_max_position_embeddings", cfg.get("original_max_position_embeddings"))
        if orig:
            meta.append(kv(p + "rope.scaling.original_context_length", U32, orig))
        if rs.get("long_factor"):
            scale = cfg["max_position_embeddings"] / orig
            attn = math.sqrt(1 + math.log(scale) / math.log(orig)) if scale > 1.0 else 1.0
            meta.append(kv(p + "rope.scaling.attn_factor", F32, attn))
    if arch == "llama" and cfg.get("num_local_experts"):
        meta += [kv(p + "expert_count", U32, cfg["num_local_experts"]),
                 kv(p + "expert_used_count", U32, cfg["num_experts_per_tok"])]
    if arch in ("qwen2moe", "qwen3moe"):
        meta += [kv(p + "expert_count", U32, cfg["num_experts"]),
                 kv(p + "expert_used_count", U32, cfg["num_experts_per_tok"]),
                 kv(p + "expert_feed_forward_length", U32, cfg["moe_intermediate_size"])]
        if cfg.get("shared_expert_intermediate_size"):
            meta.append(kv(p + "expert_shared_feed_forward_length", U32, cfg["shared_expert_intermediate_size"]))
    return meta


def write_gguf(src, dst, kind, drop=(), extra=None, edit=None, kinds=None):
    """drop: GGUF tensor names left out; extra: {GGUF name: tensor} added; edit(meta list) -> meta:
    the tests' malformed files; kinds: {GGUF name: type} for the tensors of another type than
    `kind` (a mixed file, as llama.cpp's quantize writes output.weight in another type)."""
    cfg = json.load(open(os.path.join(src, "config.json")))
    arch = ARCHES.get(cfg["architectures"][0])
    if arch is None:
        sys.exit(f"gguf_write.py: {cfg['architectures'][0]} is not written")
    check_representable(cfg, arch)
    w = read_safetensors(os.path.join(src, "model.safetensors"))
    H, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads", heads)
    head_dim = cfg.get("head_dim", H // heads)
    vocab = cfg["vocab_size"]
    gemma = arch in ("gemma2", "gemma3")
    per_layer = layer_names(arch)
    experts = EXPERTS.get(arch, {})

    def kind_of(t, gname):
        if kinds and gname in kinds:
            return kinds[gname]
        small = t.dim() == 1 or (kind in QUANTIZED and t.shape[-1] % BLOCK.get(kind, 32))
        return "f32" if small or gname.endswith(("ffn_gate_inp.weight", "ffn_gate_inp_shexp.weight")) else kind

    tensors, held, stacks = [], {}, {}
    for name, t in w.items():
        if gemma and name == "lm_head.weight":
            continue  # llama.cpp's Gemma converters drop it: tied embeddings
        parts = name.split(".")  # model.layers.N.<module>.weight|bias
        if name in TOP:
            gname = TOP[name]
        elif "experts" in parts and parts[-2] in experts:  # ...<block>.experts.E.<leaf>.weight
            stacks.setdefault((parts[2], experts[parts[-2]]), {})[int(parts[-3])] = name
            continue
        else:
            gname = f"blk.{parts[2]}.{per_layer['.'.join(parts[3:-1])]}.{parts[-1]}"
        permuted = arch == "llama" and name.endswith(("q_proj.weight", "k_proj.weight"))
        if permuted:
            t = permute(t, heads if "q_proj" in name else kv_heads)
        if gemma and name.endswith("norm.weight"):
            t = t.float() + 1  # llama.cpp stores Gemma's norms as 1 + w
        t = t.squeeze()
        tkind = kind_of(t, gname)
        data, values = encode(t, tkind)
        # quantized row by row, so the values of the original row order are those of the rows
        held[name] = permute_back(values, heads if "q_proj" in name else kv_heads) if permuted else values
        if gemma and name.endswith("norm.weight"):
            held[name] = values - 1
        held[name] = held[name].reshape(w[name].shape)
        tensors.append((gname, t, tkind, data))
    for (layer, gpart), by_expert in sorted(stacks.items()):
        names = [by_expert[e] for e in range(len(by_expert))]
        t = torch.stack([w[n] for n in names])  # [experts, rows, columns]
        gname = f"blk.{layer}.{gpart}.weight"
        tkind = kind_of(t, gname)
        data, values = encode(t, tkind)
        for e, n in enumerate(names):
            held[n] = values[e]
        tensors.append((gname, t, tkind, data))
    rs = cfg.get("rope_scaling") or {}
    if arch == "phi3" and rs.get("long_factor"):  # llama.cpp keeps longrope's lists as tensors
        for gname, key in (("rope_factors_long.weight", "long_factor"), ("rope_factors_short.weight", "short_factor")):
            t = torch.tensor(rs[key], dtype=torch.float32)
            tensors.append((gname, t, "f32", encode(t, "f32")[0]))
    for gname, t in (extra or {}).items():
        tensors.append((gname, t, "f32", encode(t, "f32")[0]))
    tensors = [x for x in tensors if x[0] not in drop]

    tokenizer_meta = byte_level_tokenizer(src, vocab) or sentencepiece_tokenizer(src, vocab)
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    tokens += [f"t{i}" for i in range(len(tokens), vocab)]
    tokens = tokens[:vocab]
    token_type = [2, 3, 3] + [6] * 256 + [1] * vocab
    rotary = int(cfg.get("partial_rotary_factor", 1.0) * H) // heads if arch == "phi3" else head_dim
    common = [
        kv(f"{arch}.context_length", U32, cfg.get("max_position_embeddings", 2048)),
        kv(f"{arch}.embedding_length", U32, H),
        kv(f"{arch}.block_count", U32, cfg["num_hidden_layers"]),
        kv(f"{arch}.feed_forward_length", U32, cfg["intermediate_size"]),
        kv(f"{arch}.attention.head_count", U32, heads),
        kv(f"{arch}.attention.head_count_kv", U32, kv_heads),
        kv(f"{arch}.attention.layer_norm_rms_epsilon", F32, cfg.get("rms_norm_eps", 1e-6)),
    ]
    if arch != "phi3":
        common += [kv(f"{arch}.attention.key_length", U32, head_dim),
                   kv(f"{arch}.attention.value_length", U32, head_dim)]
    if arch in ("llama", "qwen2", "qwen3", "phi3"):
        common.append(kv(f"{arch}.rope.dimension_count", U32, rotary))
    if arch != "gemma2":
        common.append(kv(f"{arch}.rope.freq_base", F32, cfg.get("rope_theta", 10000.0)))
    meta = [
        kv("general.architecture", STRING, arch),
        kv("general.name", STRING, os.path.basename(os.path.abspath(src))),
        kv("general.file_type", U32, FILE_TYPE[kind]),
        kv("general.quantization_version", U32, 2),
        kv("general.alignment", U32, ALIGN),
    ] + common + arch_metadata(cfg, arch, head_dim) + (tokenizer_meta or [
        kv("tokenizer.ggml.model", STRING, "llama"),
        kv("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
        kv("tokenizer.ggml.scores", ARRAY, (F32, [0.0] * vocab)),
        kv("tokenizer.ggml.token_type", ARRAY, (I32, token_type[:vocab])),
        kv("tokenizer.ggml.unknown_token_id", U32, 0),
        kv("tokenizer.ggml.add_bos_token", BOOL, False)]) + [
        kv("tokenizer.ggml.bos_token_id", U32, cfg.get("bos_token_id") or 1),
        kv("tokenizer.ggml.eos_token_id", U32, first(cfg.get("eos_token_id"), 2)),
    ]
    if edit:
        meta = edit(meta)

    blobs, infos, offset = [], [], 0
    for gname, t, tkind, data in tensors:
        pad = (-offset) % ALIGN
        offset += pad
        blobs.append(b"\0" * pad + data)
        dims = list(reversed(t.shape))
        infos.append(gguf_string(gname) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
                     + struct.pack("<IQ", GGML[tkind], offset))
        offset += len(data)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta)) + b"".join(meta) + b"".join(infos)
    head += b"\0" * ((-len(head)) % ALIGN)
    tmp = dst + ".tmp"
    with open(tmp, "wb") as f:
        f.write(head)
        for b in blobs:
            f.write(b)
    os.replace(tmp, dst)
    return held


def main():
    kind = sys.argv[sys.argv.index("--type") + 1] if "--type" in sys.argv else "f16"
    write_gguf(sys.argv[1], sys.argv[2], kind)


if __name__ == "__main__":
    main()
