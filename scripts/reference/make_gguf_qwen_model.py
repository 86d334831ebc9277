#!/usr/bin/env python3
"""Writes a tiny random-weight Qwen2 or Qwen3 model as a GGUF file, laid out
as llama.cpp's Hugging Face converter (convert_hf_to_gguf.py) lays out a
Qwen2ForCausalLM / Qwen3ForCausalLM checkpoint converted with --outtype f32:
the same metadata keys in the same order, the same tensor names in the
order of the checkpoint's (name-sorted) safetensors, no row permutation.

Usage: make_gguf_qwen_model.py GGUF_PY_DIR {qwen2,qwen3} TRAIN_TEXT OUT.gguf

GGUF_PY_DIR is llama.cpp's gguf-py folder (its Python GGUF writer, and its
tables of architecture and tensor names, which the script checks each name
against); TRAIN_TEXT is the text the small byte-level BPE vocabulary is
learned from. Needs numpy. The output is a pure function of the arguments:
the weights come from a seeded SplitMix64, not from numpy's generators.
"""
import re
import sys
from pathlib import Path

import numpy as np

# The two models: small enough to commit, shaped like the real ones where it
# matters (GQA; Qwen2 with q/k/v biases and the classifier tied to the
# embedding; Qwen3 with per-head q/k RMSNorm, a head dimension that is not
# hidden / heads, and its own classifier).
MODELS = {
    "qwen2": dict(hidden=64, layers=2, heads=4, kv_heads=2, head_dim=None, ffn=192,
                  rope_theta=1000000.0, context=256, tied=True, seed=2),
    "qwen3": dict(hidden=64, layers=2, heads=4, kv_heads=2, head_dim=32, ffn=192,
                  rope_theta=10000.0, context=256, tied=False, seed=3),
}
RMS_EPS = 1e-6
NUM_MERGES = 128
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB_SIZE = 400  # config.json's vocab_size: the converter pads to it with [PAD<i>]


def bytes_to_unicode():
    """GPT-2's byte-level alphabet: byte -> printable character, in the
    order Qwen's vocabulary lists the byte tokens (ids 0-255)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [(b, chr(c)) for b, c in zip(bs, cs)]


def learn_merges(text, alphabet, num_merges):
    """Byte-level BPE merges learned from `text`: the most frequent adjacent
    pair first, ties broken by the pair's text."""
    enc = dict(alphabet)
    # A rough word split (a leading space stays with its word), for learning
    # only: llama.cpp tokenizes with its own "qwen2" pre-tokenizer.
    words = {}
    for w in re.findall(r" ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]+|\s+", text):
        sym = tuple(enc[b] for b in w.encode("utf-8"))
        words[sym] = words.get(sym, 0) + 1
    merges = []
    for _ in range(num_merges):
        pairs = {}
        for sym, n in words.items():
            for a, b in zip(sym, sym[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + n
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        merged = {}
        for sym, n in words.items():
            out, i = [], 0
            while i < len(sym):
                if i + 1 < len(sym) and (sym[i], sym[i + 1]) == best:
                    out.append(sym[i] + sym[i + 1])
                    i += 2
                else:
                    out.append(sym[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + n
        words = merged
    return merges


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFFFFFFFFFF

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        return z ^ (z >> 31)

    def uniform(self, shape, lo, hi):
        """f32 values uniform in [lo, hi), row-major."""
        n = int(np.prod(shape))
        u = np.array([self.next() >> 11 for _ in range(n)], dtype=np.float64) / float(1 << 53)
        return (lo + (hi - lo) * u).astype(np.float32).reshape(shape)


def checkpoint(arch_name, cfg, vocab_size, rng):
    """The Hugging Face checkpoint's tensors, {name: array [out, in]}.
    Scales give logits spread over a few units and attention that is
    neither uniform nor one-hot; norms and biases far from their neutral
    values, so that a missing one changes the logits."""
    h, hd = cfg["hidden"], cfg["head_dim"] or cfg["hidden"] // cfg["heads"]
    q_dim, kv_dim, ffn = cfg["heads"] * hd, cfg["kv_heads"] * hd, cfg["ffn"]

    def w(rows, cols, std):  # uniform with this standard deviation
        a = std * 3 ** 0.5
        return rng.uniform((rows, cols), -a, a)

    def norm(n):
        return rng.uniform((n,), 0.5, 1.5)

    t = {"model.embed_tokens.weight": w(vocab_size, h, 0.5)}
    if not cfg["tied"]:
        t["lm_head.weight"] = w(vocab_size, h, 0.4)
    for i in range(cfg["layers"]):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = norm(h)
        t[p + "self_attn.q_proj.weight"] = w(q_dim, h, 0.2)
        t[p + "self_attn.k_proj.weight"] = w(kv_dim, h, 0.2)
        t[p + "self_attn.v_proj.weight"] = w(kv_dim, h, 0.2)
        t[p + "self_attn.o_proj.weight"] = w(h, q_dim, 0.2)
        if arch_name == "qwen2":
            t[p + "self_attn.q_proj.bias"] = rng.uniform((q_dim,), -1.0, 1.0)
            t[p + "self_attn.k_proj.bias"] = rng.uniform((kv_dim,), -1.0, 1.0)
            t[p + "self_attn.v_proj.bias"] = rng.uniform((kv_dim,), -1.0, 1.0)
        else:
            t[p + "self_attn.q_norm.weight"] = norm(hd)
            t[p + "self_attn.k_norm.weight"] = norm(hd)
        t[p + "post_attention_layernorm.weight"] = norm(h)
        t[p + "mlp.gate_proj.weight"] = w(ffn, h, 0.2)
        t[p + "mlp.up_proj.weight"] = w(ffn, h, 0.2)
        t[p + "mlp.down_proj.weight"] = w(h, ffn, 0.2)
    t["model.norm.weight"] = norm(h)
    return t


# Hugging Face names -> GGUF tensor kinds (gguf-py's MODEL_TENSOR names),
# as gguf-py's tensor_mapping maps Qwen2/Qwen3 checkpoints.
HF_TO_KIND = {
    "model.embed_tokens": "TOKEN_EMBD",
    "lm_head": "OUTPUT",
    "model.norm": "OUTPUT_NORM",
    "input_layernorm": "ATTN_NORM",
    "self_attn.q_proj": "ATTN_Q",
    "self_attn.k_proj": "ATTN_K",
    "self_attn.v_proj": "ATTN_V",
    "self_attn.o_proj": "ATTN_OUT",
    "self_attn.q_norm": "ATTN_Q_NORM",
    "self_attn.k_norm": "ATTN_K_NORM",
    "post_attention_layernorm": "FFN_NORM",
    "mlp.gate_proj": "FFN_GATE",
    "mlp.up_proj": "FFN_UP",
    "mlp.down_proj": "FFN_DOWN",
}


def gguf_name(gguf, arch, hf_name):
    stem, suffix = hf_name.rsplit(".", 1)
    m = re.match(r"model\.layers\.(\d+)\.(.*)", stem)
    bid, key = (int(m.group(1)), m.group(2)) if m else (None, stem)
    kind = getattr(gguf.MODEL_TENSOR, HF_TO_KIND[key])
    if kind not in gguf.MODEL_TENSORS[arch]:
        sys.exit(f"{hf_name}: gguf-py lists no {kind.name} for {arch.name}")
    name = gguf.TENSOR_NAMES[kind]
    return (name.format(bid=bid) if bid is not None else name) + "." + suffix


def main():
    if len(sys.argv) != 5 or sys.argv[2] not in MODELS:
        sys.exit(__doc__)
    sys.path.insert(0, sys.argv[1])
    import gguf  # llama.cpp's gguf-py

    arch_name, text_path, out = sys.argv[2], sys.argv[3], sys.argv[4]
    cfg = MODELS[arch_name]
    arch = next(a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == arch_name)

    # Vocabulary: the 256 byte tokens, the merges' tokens, the special
    # tokens (control), then [PAD<i>] (unused) up to VOCAB_SIZE.
    alphabet = bytes_to_unicode()
    merges = learn_merges(Path(text_path).read_text(encoding="utf-8"), alphabet, NUM_MERGES)
    tokens = [c for _, c in alphabet] + [a + b for a, b in merges] + SPECIALS
    types = [gguf.TokenType.NORMAL] * (len(tokens) - len(SPECIALS)) + \
        [gguf.TokenType.CONTROL] * len(SPECIALS)
    assert len(set(tokens)) == len(tokens) and len(tokens) <= VOCAB_SIZE
    for i in range(len(tokens), VOCAB_SIZE):
        tokens.append(f"[PAD{i}]")
        types.append(gguf.TokenType.UNUSED)
    endoftext, im_end = tokens.index("<|endoftext|>"), tokens.index("<|im_end|>")

    rng = SplitMix64(cfg["seed"])
    hf = checkpoint(arch_name, cfg, VOCAB_SIZE, rng)

    w = gguf.GGUFWriter(out, arch_name)
    for hf_name in sorted(hf):  # safetensors order: by name
        w.add_tensor(gguf_name(gguf, arch, hf_name), hf[hf_name])
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(f"pvllm tiny random {arch_name}")
    w.add_block_count(cfg["layers"])
    w.add_context_length(cfg["context"])
    w.add_embedding_length(cfg["hidden"])
    w.add_feed_forward_length(cfg["ffn"])
    w.add_head_count(cfg["heads"])
    w.add_head_count_kv(cfg["kv_heads"])
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(RMS_EPS)
    if cfg["head_dim"] is not None:  # config.json's head_dim, as Qwen3's carry
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges([f"{a} {b}" for a, b in merges])
    # As the converter's SpecialVocab finds them for Qwen: eos and pad from
    # tokenizer_config.json, bos from config.json; no BOS added.
    w.add_eos_token_id(im_end if arch_name == "qwen3" else endoftext)
    w.add_pad_token_id(endoftext)
    w.add_bos_token_id(endoftext)
    w.add_add_bos_token(False)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
