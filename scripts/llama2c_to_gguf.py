#!/usr/bin/env python3
"""The F32 GGUF of a llama2.c checkpoint too large for llama.cpp's
llama-convert-llama2c-to-ggml (its ggml context has a fixed size and aborts
past about 2 GiB of weights, e.g. on the TinyLlama-1.1B shape), written with
llama.cpp's own GGUF library, gguf-py, so that both engines of
scripts/bench_cpu_quant.py read a file made by llama.cpp's tools.

    llama2c_to_gguf.py CHECKPOINT.bin TEMPLATE.gguf OUT.gguf

TEMPLATE is a GGUF that llama-convert-llama2c-to-ggml wrote for a smaller
checkpoint with the same vocabulary: its general.* and tokenizer.* metadata
and its norm epsilon are copied, the llama.* sizes come from CHECKPOINT's
header, and the tensors are the checkpoint's, named and ordered as
TEMPLATE's (the classifier shared with the embedding, as the checkpoint
has it, when TEMPLATE has no output.weight). Needs numpy (apt-get install
python3-numpy) and gguf-py on PYTHONPATH (LLAMA_CPP_SRC/gguf-py; by
default the folder two above LLAMA_CPP_BIN).
"""
import os
import struct
import sys

import numpy as np


def import_gguf():
    src = os.environ.get("LLAMA_CPP_SRC")
    if not src and os.environ.get("LLAMA_CPP_BIN"):
        src = os.path.dirname(os.path.dirname(os.path.abspath(os.environ["LLAMA_CPP_BIN"])))
    if src:
        sys.path.insert(0, os.path.join(src, "gguf-py"))
    import gguf  # noqa: E402
    return gguf


def field_value(gguf, field):
    """A GGUFReader field's value as GGUFWriter.add_key_value takes it."""
    t = field.types[0]
    if t == gguf.GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8"), t, None
    if t == gguf.GGUFValueType.ARRAY:
        sub = field.types[1]
        if sub == gguf.GGUFValueType.STRING:
            values = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        else:
            values = [field.parts[i][0].item() for i in field.data]
        return values, t, sub
    return field.parts[field.data[0]][0].item(), t, None


def read_header(path):
    with open(path, "rb") as f:
        dim, hidden, layers, heads, kv_heads, vocab, seq_len = struct.unpack("<7i", f.read(28))
    return dict(dim=dim, hidden=hidden, layers=layers, heads=heads, kv_heads=kv_heads,
                vocab=abs(vocab), shared=vocab > 0, seq_len=seq_len)


def checkpoint_tensors(path, h):
    """llama2.c's tensors in file order, as float32 views of the file."""
    data = np.memmap(path, dtype=np.float32, mode="r", offset=28)
    dim, hidden, layers = h["dim"], h["hidden"], h["layers"]
    head = dim // h["heads"]
    kv = h["kv_heads"] * head
    at = 0
    out = {}

    def take(name, shape):
        nonlocal at
        n = int(np.prod(shape))
        out[name] = data[at:at + n].reshape(shape)
        at += n

    take("embed", (h["vocab"], dim))
    take("rms_att", (layers, dim))
    take("wq", (layers, dim, dim))
    take("wk", (layers, kv, dim))
    take("wv", (layers, kv, dim))
    take("wo", (layers, dim, dim))
    take("rms_ffn", (layers, dim))
    take("w1", (layers, hidden, dim))
    take("w2", (layers, dim, hidden))
    take("w3", (layers, hidden, dim))
    take("rms_final", (dim,))
    take("freq_real", (h["seq_len"], head // 2))
    take("freq_imag", (h["seq_len"], head // 2))
    if not h["shared"]:
        take("wcls", (h["vocab"], dim))
    if at != data.size:
        raise SystemExit(f"{path}: {data.size - at} floats left after the tensors its header sizes")
    return out


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    ckpt, template_path, out_path = sys.argv[1:]
    gguf = import_gguf()
    h = read_header(ckpt)
    t = checkpoint_tensors(ckpt, h)
    template = gguf.GGUFReader(template_path)
    arch = "llama"
    w = gguf.GGUFWriter(out_path, arch)
    eps = None
    for name, field in template.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name == f"{arch}.attention.layer_norm_rms_epsilon":
            eps = field_value(gguf, field)[0]
            continue
        if name.startswith("general.") or name.startswith("tokenizer."):
            value, vtype, sub = field_value(gguf, field)
            if vtype == gguf.GGUFValueType.ARRAY:
                # gguf-py infers the element type (str, float, int: string,
                # f32, i32, which is what the converter writes for these).
                expected = {str: gguf.GGUFValueType.STRING, float: gguf.GGUFValueType.FLOAT32,
                            int: gguf.GGUFValueType.INT32}
                if value and expected.get(type(value[0])) != sub:
                    raise SystemExit(f"{template_path}: {name} holds {sub.name}, which gguf-py "
                                     "would write as another type")
                w.add_array(name, value)
            else:
                w.add_key_value(name, value, vtype)
    head = h["dim"] // h["heads"]
    w.add_context_length(h["seq_len"])
    w.add_embedding_length(h["dim"])
    w.add_feed_forward_length(h["hidden"])
    w.add_block_count(h["layers"])
    w.add_head_count(h["heads"])
    w.add_head_count_kv(h["kv_heads"])
    w.add_rope_dimension_count(head)
    w.add_layer_norm_rms_eps(eps if eps is not None else 1e-5)

    names = [tt.name for tt in template.tensors]
    layer_names = {
        "attn_norm": lambda i: t["rms_att"][i], "attn_q": lambda i: t["wq"][i],
        "attn_k": lambda i: t["wk"][i], "attn_v": lambda i: t["wv"][i],
        "attn_output": lambda i: t["wo"][i], "ffn_norm": lambda i: t["rms_ffn"][i],
        "ffn_gate": lambda i: t["w1"][i], "ffn_down": lambda i: t["w2"][i],
        "ffn_up": lambda i: t["w3"][i],
    }
    per_layer = [n.split(".", 2)[2].rsplit(".", 1)[0] for n in names if n.startswith("blk.0.")]
    for n in names:
        if n.startswith("blk."):
            continue
        if n == "token_embd.weight":
            w.add_tensor(n, t["embed"])
        elif n == "output_norm.weight":
            w.add_tensor(n, t["rms_final"])
        elif n == "output.weight":
            w.add_tensor(n, t["embed"] if h["shared"] else t["wcls"])
        else:
            raise SystemExit(f"{template_path}: tensor {n} is not one this script maps")
    for i in range(h["layers"]):
        for part in per_layer:
            if part not in layer_names:
                raise SystemExit(f"{template_path}: tensor blk.0.{part} is not one this script maps")
            w.add_tensor(f"blk.{i}.{part}.weight", np.ascontiguousarray(layer_names[part](i)))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
