"""Readers for the weight-only tests, written from the documented formats (man ipex-tool,
section IMPORT): safetensors (u64 little-endian header length, JSON header, data) and the
normalized ipex-woq checkpoint, dequantized as W[n, k] = (q - zeros[n, g]) * scales[n, g]."""

import json
import os
import struct

import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I32": torch.int32,
          "I64": torch.int64, "I8": torch.int8, "U8": torch.uint8, "I16": torch.int16}
BLOCK = 32

WOQ_FIXTURES = os.path.join(os.environ.get("IPEX_FIXTURES", ""), "woq")


def woq_manifest() -> dict:
    with open(os.path.join(WOQ_FIXTURES, "woq.json")) as f:
        return json.load(f)


def read_safetensors(path: str):
    """-> (tensors by name, metadata dict)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        dtype = DTYPES[entry["dtype"]]
        buf = bytearray(data[begin:end])
        t = torch.frombuffer(buf, dtype=dtype) if buf else torch.empty(0, dtype=dtype)
        tensors[name] = t.reshape(entry["shape"])
    return tensors, metadata


def unpack(qweight: torch.Tensor, bits: int, k: int) -> torch.Tensor:
    """Packed rows -> uint8 [N, K]: int4 blocks of 32 channels, byte j = channel j (low nibble)
    and channel j + 16 (high nibble)."""
    n = qweight.shape[0]
    if bits == 8:
        return qweight[:, :k]
    blocks = qweight.reshape(n, -1, BLOCK // 2)
    q = torch.cat([blocks & 0x0F, blocks >> 4], dim=2).reshape(n, -1)
    return q[:, :k]


def dequantize_layers(path: str) -> dict:
    """Every layer of a normalized checkpoint -> {"<name>.weight": [N, K] fp32, "<name>.bias"}."""
    tensors, metadata = read_safetensors(path)
    assert metadata["format"] == "ipex-woq", metadata
    out = {}
    for layer in json.loads(metadata["layers"]):
        name, k, gs, bits = layer["name"], layer["in_features"], layer["group_size"], layer["bits"]
        q = unpack(tensors[name + ".qweight"], bits, k).float()
        zeros = tensors[name + ".zeros"].repeat_interleave(gs, dim=1)
        scales = tensors[name + ".scales"].repeat_interleave(gs, dim=1)
        w = (q - zeros) * scales
        if layer["act_order"]:
            natural = torch.empty_like(w)
            natural[:, tensors[name + ".perm"]] = w
            w = natural
        out[name + ".weight"] = w
        if layer["bias"]:
            out[name + ".bias"] = tensors[name + ".bias"]
    return out
