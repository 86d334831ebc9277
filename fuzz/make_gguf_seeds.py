#!/usr/bin/env python3
"""Writes the fuzz_gguf seeds into fuzz/corpus/gguf: a few small GGUF
files, valid and damaged, each under 2 KiB. Run it again after changing
it: python3 fuzz/make_gguf_seeds.py"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "gguf")

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
FORMATS = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f",
           BOOL: "B", U64: "Q", I64: "q", F64: "d"}
# ggml type id: (elements per block, bytes per block)
BLOCKS = {0: (1, 4), 1: (1, 2), 8: (32, 34), 9: (32, 36), 12: (256, 144),
          26: (1, 4), 30: (1, 2), 35: (256, 66)}


def string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def value(vtype, v):
    if vtype == STRING:
        return string(v)
    if vtype == ARRAY:
        etype, items = v
        body = b"".join(value(etype, x) for x in items)
        return struct.pack("<IQ", etype, len(items)) + body
    return struct.pack("<" + FORMATS[vtype], v)


def gguf(kvs, tensors, version=3, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, dims, ggml type)]."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for key, vtype, v in kvs:
        out += string(key) + struct.pack("<I", vtype) + value(vtype, v)
    sizes, offsets, end = [], [], 0
    for _, dims, gtype in tensors:
        block, nbytes = BLOCKS[gtype]
        n = 1
        for d in dims:
            n *= d
        sizes.append(n // block * nbytes)
        offsets.append((end + alignment - 1) // alignment * alignment)
        end = offsets[-1] + sizes[-1]
    for (name, dims, gtype), offset in zip(tensors, offsets):
        out += string(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", gtype, offset)
    data_start = (len(out) + alignment - 1) // alignment * alignment
    out += bytes(data_start - len(out))
    for i, (size, offset) in enumerate(zip(sizes, offsets)):
        out += bytes(data_start + offset - len(out)) + bytes((i * 31 + j) % 256 for j in range(size))
    return out


MODEL_KVS = [
    ("general.architecture", STRING, "llama"),
    ("llama.block_count", U32, 1),
    ("llama.rope.freq_base", F32, 10000.0),
    ("tokenizer.ggml.tokens", ARRAY, (STRING, ["<s>", "</s>", "a"])),
    ("tokenizer.ggml.scores", ARRAY, (F32, [0.0, 0.0, -1.0])),
    ("tokenizer.ggml.token_type", ARRAY, (I32, [3, 3, 1])),
    ("tokenizer.ggml.add_bos_token", BOOL, 1),
]
MODEL_TENSORS = [("token_embd.weight", [32, 3], 8), ("blk.0.attn_norm.weight", [8], 0),
                 ("output.weight", [256], 12)]

SEEDS = {
    "model_v3": gguf(MODEL_KVS, MODEL_TENSORS),
    "model_v2_align64": gguf([("general.alignment", U32, 64)] + MODEL_KVS[:2],
                             [("a", [4, 4], 1), ("b", [8], 30)], version=2, alignment=64),
    "every_value_type": gguf(
        [("u8", U8, 255), ("i8", I8, -1), ("u16", U16, 7), ("i16", I16, -7), ("u32", U32, 1),
         ("i32", I32, -1), ("f32", F32, 0.5), ("bool", BOOL, 0), ("string", STRING, "s"),
         ("u64", U64, 2**64 - 1), ("i64", I64, -2**63), ("f64", F64, 1e-300),
         ("arr_u16", ARRAY, (U16, [1, 2])), ("arr_i64", ARRAY, (I64, [-1])),
         ("arr_bool", ARRAY, (BOOL, [1, 0])), ("arr_f64", ARRAY, (F64, [])),
         ("split.count", U16, 1)], []),
    "unserved_types": gguf(MODEL_KVS[:1], [("i", [4], 26), ("q", [32], 9), ("t", [256], 35)]),
}
# Damaged: the reader must refuse these (and the fuzzer start near them).
overlap = bytearray(SEEDS["model_v3"])
SEEDS["overlapping_tensors"] = bytes(overlap).replace(
    struct.pack("<IQ", 0, 128), struct.pack("<IQ", 0, 96))
model = SEEDS["model_v3"]
SEEDS["truncated_tensor_info"] = model[:model.index(b"output.weight") + 20]

os.makedirs(OUT, exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
    print(f"{name}: {len(data)} bytes")
