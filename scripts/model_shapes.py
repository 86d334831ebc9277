"""The transformers configs of pvllm's random-weight shapes (core/model/random_model.cc's
table, the names `pvllm --random-weights` takes): TinyLlama/TinyLlama-1.1B-Chat-v1.0's and
Meta-Llama-3-8B's config.json. Shared by the scripts that run the same shape through
transformers (hf_compare.py, bench_vs_transformers.py)."""

SHAPES = {
    "tinyllama-1.1b": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                           num_attention_heads=32, num_key_value_heads=4, vocab_size=32000,
                           max_position_embeddings=2048, rope_theta=10000.0, rms_norm_eps=1e-5,
                           tie_word_embeddings=False, bos_token_id=1, eos_token_id=2),
    "llama-3-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                       max_position_embeddings=8192, rope_theta=500000.0, rms_norm_eps=1e-5,
                       tie_word_embeddings=False, bos_token_id=128000, eos_token_id=128001),
}


def check(pvllm):
    """Each shape against `pvllm inspect --random-weights NAME`: the list of mismatches."""
    import subprocess

    names = {"hidden_size": "hidden_size", "intermediate_size": "intermediate_size",
             "num_hidden_layers": "num_layers", "num_attention_heads": "num_heads",
             "num_key_value_heads": "num_kv_heads", "vocab_size": "vocab_size",
             "max_position_embeddings": "max_position_embeddings", "rope_theta": "rope_theta",
             "rms_norm_eps": "rms_norm_eps", "tie_word_embeddings": "tie_word_embeddings",
             "bos_token_id": "bos_token_id", "eos_token_id": "eos_token_id"}
    problems = []
    for shape, fields in SHAPES.items():
        out = subprocess.run([pvllm, "inspect", "--random-weights", shape], capture_output=True,
                             text=True).stdout
        config = dict(line.split(None, 1) for line in out.splitlines()
                      if line.startswith("  ") and len(line.split(None, 1)) == 2)
        for key, pvllm_key in names.items():
            want = fields[key]
            got = config.get(pvllm_key, "").strip()
            same = got == str(want).lower() if isinstance(want, bool) else (
                got != "" and float(got) == float(want))
            if not same:
                problems.append(f"{shape}: {key} is {want} here, pvllm says {got or 'nothing'}")
    return problems


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: model_shapes.py PATH/TO/pvllm   (checks SHAPES against pvllm's own)")
    problems = check(sys.argv[1])
    for p in problems:
        print("model_shapes: " + p, file=sys.stderr)
    print(f"model_shapes: {len(SHAPES)} shapes {'differ' if problems else 'match pvllm'}")
    sys.exit(1 if problems else 0)
