#!/usr/bin/env python3
"""Reference outputs of Hugging Face transformers for pvllm's tiny models of
every architecture it runs (Llama 2/3 with each RoPE scaling, Mistral with a
sliding window, Qwen2, Qwen3), for tests/integration/arch_golden_test.cc.

The models are the folders `pvllm_make_tiny_model DIR --arch all` writes
(random weights from fixed seeds, float32). For each one this loads the
folder with AutoModelForCausalLM in float32 on the CPU (eager attention),
runs the fixed prompt in one forward, then greedily generates --new-tokens
tokens one forward per token with the KV cache (as generate() does, EOS
ignored), and writes <out>/<name>.json:

  {"model": name, "transformers_version": ..., "torch_version": ...,
   "model_checksum": FNV-1a 64 of model.safetensors (hex),
   "prompt": [ids], "tokens": [greedy ids],
   "steps": [{"top_ids": [5 ids], "top_logits": [5 floats]}, ...]}

step i holds the logits after the prompt and tokens[:i]. A model this
transformers cannot read as written (the v5 config spelling on transformers
4) gets {"model": name, "skipped": reason} instead.

  python3 arch_goldens.py --make-tiny-model bin/pvllm_make_tiny_model \
      --out arch_goldens [--json summary.json] [--new-tokens 8]
  python3 arch_goldens.py --models DIR --out arch_goldens   # folders already made
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

PROMPT_LEN = 24  # longer than the Mistral window (8) and the dynamic model's context (16)


def prompt_ids(vocab):
    # The same formula as tests/integration/arch_golden_test.cc reads back
    # from the JSON (it uses the stored prompt, so only the file matters).
    return [3 + (7 * i + 11) % (vocab - 3) for i in range(PROMPT_LEN)]


def fnv1a64(path):
    h = 0xCBF29CE484222325
    with open(path, "rb") as f:
        data = f.read()
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def run_model(folder, name, new_tokens, torch, transformers):
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    major = int(transformers.__version__.split(".")[0])
    if "rope_parameters" in config and major < 5:
        return {"model": name, "skipped": "the v5 config spelling (rope_parameters) needs "
                f"transformers 5, this is {transformers.__version__}"}
    kwargs = {"attn_implementation": "eager"}
    kwargs["dtype" if major >= 5 else "torch_dtype"] = torch.float32
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, **kwargs)
    model.eval()
    prompt = prompt_ids(config["vocab_size"])
    tokens, steps = [], []
    with torch.no_grad():
        out = model(input_ids=torch.tensor([prompt]), use_cache=True)
        for _ in range(new_tokens):
            logits = out.logits[0, -1].float()
            top = torch.topk(logits, 5)
            steps.append({"top_ids": [int(i) for i in top.indices],
                          "top_logits": [float(v) for v in top.values]})
            token = int(torch.argmax(logits))
            tokens.append(token)
            out = model(input_ids=torch.tensor([[token]]), past_key_values=out.past_key_values,
                        use_cache=True)
    return {"model": name, "transformers_version": transformers.__version__,
            "torch_version": torch.__version__,
            "model_checksum": fnv1a64(os.path.join(folder, "model.safetensors")),
            "prompt": prompt, "tokens": tokens, "steps": steps}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--make-tiny-model", help="pvllm_make_tiny_model, to write the folders first")
    ap.add_argument("--models", help="folder of tiny model folders (default: a temporary one)")
    ap.add_argument("--out", required=True, help="folder for <name>.json")
    ap.add_argument("--json", help="a summary: per model, ok/skipped/error and seconds")
    ap.add_argument("--new-tokens", type=int, default=8)
    args = ap.parse_args()

    import torch
    import transformers
    torch.manual_seed(0)

    tmp = None
    models = args.models
    if models is None:
        tmp = tempfile.TemporaryDirectory()
        models = tmp.name
    if args.make_tiny_model:
        subprocess.run([args.make_tiny_model, models, "--arch", "all"], check=True,
                       stdout=subprocess.DEVNULL)
    os.makedirs(args.out, exist_ok=True)
    summary, failed = [], False
    for name in sorted(os.listdir(models)):
        folder = os.path.join(models, name)
        if not os.path.isfile(os.path.join(folder, "config.json")):
            continue
        start = time.time()
        try:
            result = run_model(folder, name, args.new_tokens, torch, transformers)
            with open(os.path.join(args.out, name + ".json"), "w") as f:
                json.dump(result, f, indent=1)
            status = "skipped: " + result["skipped"] if "skipped" in result else "ok"
        except Exception as e:  # one model's failure is reported, the rest still run
            status, failed = f"error: {type(e).__name__}: {e}", True
        summary.append({"model": name, "status": status,
                        "seconds": round(time.time() - start, 2)})
        print(f"arch_goldens: {name}: {status}", flush=True)
    if not summary:
        print(f"arch_goldens: no model folders under {models}", file=sys.stderr)
        failed = True
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"transformers_version": transformers.__version__,
                       "torch_version": torch.__version__, "models": summary}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
