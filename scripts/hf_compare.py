#!/usr/bin/env python3
"""pvllm on CUDA against Hugging Face transformers, on a GPU machine.

For each model, the same weights run greedily in bf16 through pvllm (the C ABI
through ctypes, on --device) and through transformers (LlamaForCausalLM on the
GPU, bf16, its own KV cache), from the same random token prompts:

  * stories260k: the real stories260K in Hugging Face layout, from
    $PVLLM_SHARED_DIR/models/stories260K-hf (skipped, saying so, without it);
  * tinyllama-1.1b: TinyLlama-1.1B's shape (22 layers, hidden 2048, 32 heads, 4 kv
    heads, 32k vocabulary) with random weights;
  * llama-3-8b: Llama-3-8B's shape (32 layers, hidden 4096, 32 heads, 8 kv
    heads, 128,256-token vocabulary, rope theta 500,000) with random weights.

Random weights are drawn on the GPU (seeded, std --init-range: larger than
transformers' 0.02 so the logits are not flat) and saved as bf16 safetensors,
which pvllm then loads; transformers reads the same files back.

The pass rule is vLLM's (check_logprobs_close): at every generated position
where the two sequences still agree, if the chosen tokens differ, each side's
token must be in the other's top 5 (--top-k), and the comparison of that
prompt stops there, since the continuations part. The figures reported: how
many sequences are identical, where each divergence falls, and the largest
absolute difference between the two sides' log-probabilities of pvllm's top 5
at the positions compared (log-probs are the logits less a per-row constant).

Exits 1 when a model fails the rule, 0 otherwise. --json PATH writes the
figures there as well.

Usage: scripts/hf_compare.py --lib build/capi/libpvllm.so [--device cuda]
           [--models stories260k,tinyllama-1.1b,llama-3-8b] [--json out.json]
Needs torch and transformers, and a CUDA GPU.
"""
import argparse
import ctypes as C
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_shapes import SHAPES  # noqa: E402


class EngineParams(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("model_path", C.c_char_p),
        ("device", C.c_char_p),
        ("block_size", C.c_int32),
        ("kv_cache_bytes", C.c_int64),
        ("num_kv_blocks", C.c_int32),
        ("max_num_seqs", C.c_int32),
        ("max_num_batched_tokens", C.c_int32),
        ("max_model_len", C.c_int32),
        ("enable_prefix_caching", C.c_uint8),
        ("num_threads", C.c_int32),
        ("progress", C.c_void_p),
        ("progress_user_data", C.c_void_p),
        ("kv_allocator", C.c_int32),
        ("random_weights", C.c_char_p),
        ("gpu_memory_utilization", C.c_float),
        ("dtype", C.c_int32),
        ("enable_cuda_graphs", C.c_uint8),
    ]


class SamplingParams(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("temperature", C.c_float),
        ("top_k", C.c_int32),
        ("top_p", C.c_float),
        ("min_p", C.c_float),
        ("repetition_penalty", C.c_float),
        ("presence_penalty", C.c_float),
        ("frequency_penalty", C.c_float),
        ("max_tokens", C.c_int32),
        ("stop_token_ids", C.POINTER(C.c_int32)),
        ("num_stop_token_ids", C.c_size_t),
        ("stop", C.c_void_p),
        ("num_stop", C.c_size_t),
        ("ignore_eos", C.c_uint8),
        ("logprobs", C.c_int32),
        ("has_seed", C.c_uint8),
        ("seed", C.c_uint64),
        ("n", C.c_int32),
    ]


class Request(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("prompt_text", C.c_char_p),
        ("prompt_token_ids", C.POINTER(C.c_int32)),
        ("num_prompt_token_ids", C.c_size_t),
        ("sampling", C.POINTER(SamplingParams)),
        ("priority", C.c_int32),
    ]


class Logprob(C.Structure):
    _fields_ = [("token_id", C.c_int32), ("logprob", C.c_float)]


class TokenLogprobs(C.Structure):
    _fields_ = [
        ("token_id", C.c_int32),
        ("logprob", C.c_float),
        ("top", C.POINTER(Logprob)),
        ("num_top", C.c_size_t),
    ]


class Output(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("request_id", C.c_uint64),
        ("sample_index", C.c_int32),
        ("token_ids", C.POINTER(C.c_int32)),
        ("num_token_ids", C.c_size_t),
        ("text", C.c_char_p),
        ("text_len", C.c_size_t),
        ("finish_reason", C.c_int32),
        ("logprobs", C.POINTER(TokenLogprobs)),
        ("error_message", C.c_char_p),
    ]


def load_lib(path):
    lib = C.CDLL(path)
    lib.pvllm_engine_params_init.argtypes = [C.POINTER(EngineParams), C.c_size_t]
    lib.pvllm_sampling_params_init.argtypes = [C.POINTER(SamplingParams), C.c_size_t]
    lib.pvllm_request_init.argtypes = [C.POINTER(Request), C.c_size_t]
    lib.pvllm_engine_create.argtypes = [C.POINTER(EngineParams), C.POINTER(C.c_void_p),
                                        C.POINTER(C.c_void_p)]
    lib.pvllm_engine_destroy.argtypes = [C.c_void_p]
    lib.pvllm_submit.argtypes = [C.c_void_p, C.POINTER(Request), C.POINTER(C.c_uint64),
                                 C.POINTER(C.c_void_p)]
    lib.pvllm_step.argtypes = [C.c_void_p, C.POINTER(C.c_int32), C.POINTER(C.c_void_p)]
    lib.pvllm_poll.argtypes = [C.c_void_p, C.c_size_t, C.POINTER(C.c_void_p),
                               C.POINTER(C.c_void_p)]
    lib.pvllm_output_batch_size.argtypes = [C.c_void_p]
    lib.pvllm_output_batch_size.restype = C.c_size_t
    lib.pvllm_output_batch_get.argtypes = [C.c_void_p, C.c_size_t]
    lib.pvllm_output_batch_get.restype = C.POINTER(Output)
    lib.pvllm_output_batch_free.argtypes = [C.c_void_p]
    lib.pvllm_error_message.argtypes = [C.c_void_p]
    lib.pvllm_error_message.restype = C.c_char_p
    lib.pvllm_error_free.argtypes = [C.c_void_p]
    return lib


def check(lib, status, err, what):
    if status != 0:
        msg = lib.pvllm_error_message(err).decode() if err else ""
        lib.pvllm_error_free(err)
        sys.exit(f"{what} failed with status {status}: {msg}")


def make_random_model(name, out_dir, init_range, layers=None):
    """Writes a random-weight model of the shape `name` to out_dir (bf16 safetensors)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    fields = dict(SHAPES[name], initializer_range=init_range)
    if layers:
        fields["num_hidden_layers"] = layers
    config = LlamaConfig(**fields)
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(default)
    model.save_pretrained(out_dir, safe_serialization=True)
    shared = os.environ.get("PVLLM_SHARED_DIR")
    tok = os.path.join(shared, "models", "llama2-tokenizer", "tokenizer.model") if shared else ""
    if SHAPES[name]["vocab_size"] == 32000 and tok and os.path.exists(tok):  # Llama 2's
        shutil.copy(tok, os.path.join(out_dir, "tokenizer.model"))
    del model


def load_hf(model_dir):
    import torch
    from transformers import LlamaForCausalLM

    try:
        model = LlamaForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    except TypeError:  # transformers before `dtype`
        model = LlamaForCausalLM.from_pretrained(model_dir, torch_dtype=torch.bfloat16)
    return model.to("cuda").eval()


def hf_generate(model, prompt, max_tokens):
    """Greedy tokens and, per step, the float32 log-probs of the bf16 logits."""
    import torch

    tokens, logprobs = [], []
    with torch.no_grad():
        out = model(torch.tensor([prompt], device="cuda"), use_cache=True)
        for _ in range(max_tokens):
            logits = out.logits[0, -1]
            tok = int(torch.argmax(logits))
            tokens.append(tok)
            logprobs.append(torch.log_softmax(logits.float(), dim=-1).cpu())
            out = model(torch.tensor([[tok]], device="cuda"), past_key_values=out.past_key_values,
                        use_cache=True)
    return tokens, logprobs


def compare(prompts, pv_results, hf_results, top_k):
    """vLLM's rule over every prompt: the figures of one model."""
    import torch

    identical, max_abs, passed, divergences, compared = 0, 0.0, True, [], 0
    for i, (pv, (hf_tokens, hf_lps)) in enumerate(zip(pv_results, hf_results)):
        same = True
        for t, (pt, ht) in enumerate(zip(pv["tokens"], hf_tokens)):
            compared += 1
            for tid, v in pv["top"][t].items():
                max_abs = max(max_abs, abs(v - hf_lps[t][tid].item()))
            if pt == ht:
                continue
            hf_top = set(torch.topk(hf_lps[t], top_k).indices.tolist())
            ok = pt in hf_top and ht in pv["top"][t]
            passed = passed and ok
            divergences.append(dict(prompt=i, position=t, pvllm_token=pt, hf_token=ht,
                                    each_in_others_top_k=ok))
            same = False
            break
        identical += same and len(pv["tokens"]) == len(hf_tokens)
    return dict(pass_=passed, identical_sequences=identical, num_prompts=len(prompts),
                positions_compared=compared, max_abs_logprob_diff=max_abs, divergences=divergences)


def pvllm_generate(lib, model_dir, device, prompts, max_tokens, top_k, max_model_len):
    params = EngineParams()
    lib.pvllm_engine_params_init(C.byref(params), C.sizeof(params))
    params.model_path = model_dir.encode()
    params.device = device.encode()
    params.max_model_len = max_model_len
    params.dtype = 1  # PVLLM_DTYPE_BF16
    engine = C.c_void_p()
    err = C.c_void_p()
    check(lib, lib.pvllm_engine_create(C.byref(params), C.byref(engine), C.byref(err)), err,
          "pvllm_engine_create")
    sampling = SamplingParams()
    lib.pvllm_sampling_params_init(C.byref(sampling), C.sizeof(sampling))
    sampling.temperature = 0.0
    sampling.max_tokens = max_tokens
    sampling.ignore_eos = 1
    sampling.logprobs = top_k
    ids = {}
    keep = []
    for i, p in enumerate(prompts):
        arr = (C.c_int32 * len(p))(*p)
        keep.append(arr)
        req = Request()
        lib.pvllm_request_init(C.byref(req), C.sizeof(req))
        req.prompt_token_ids = arr
        req.num_prompt_token_ids = len(p)
        req.sampling = C.pointer(sampling)
        rid = C.c_uint64()
        check(lib, lib.pvllm_submit(engine, C.byref(req), C.byref(rid), C.byref(err)), err,
              "pvllm_submit")
        ids[rid.value] = i
    results = [{"tokens": [], "top": []} for _ in prompts]
    unfinished = C.c_int32(1)
    while unfinished.value > 0:
        check(lib, lib.pvllm_step(engine, C.byref(unfinished), C.byref(err)), err, "pvllm_step")
        batch = C.c_void_p()
        check(lib, lib.pvllm_poll(engine, 0, C.byref(batch), C.byref(err)), err, "pvllm_poll")
        for k in range(lib.pvllm_output_batch_size(batch)):
            o = lib.pvllm_output_batch_get(batch, k).contents
            if o.finish_reason == 4:
                sys.exit("pvllm request failed: " + o.error_message.decode())
            r = results[ids[o.request_id]]
            for t in range(o.num_token_ids):
                r["tokens"].append(o.token_ids[t])
                lp = o.logprobs[t]
                r["top"].append({lp.top[j].token_id: lp.top[j].logprob for j in range(lp.num_top)})
        lib.pvllm_output_batch_free(batch)
    lib.pvllm_engine_destroy(engine)
    return results


def run_model(name, args, lib, work):
    """Both sides on one model: its figures, or {"skipped": why}."""
    import torch

    if name == "stories260k":
        shared = os.environ.get("PVLLM_SHARED_DIR")
        model_dir = os.path.join(shared, "models", "stories260K-hf") if shared else ""
        if not model_dir or not os.path.exists(os.path.join(model_dir, "config.json")):
            return {"skipped": "no $PVLLM_SHARED_DIR/models/stories260K-hf"}
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)
        vocab, bos, max_pos = cfg["vocab_size"], cfg.get("bos_token_id", 1), cfg["max_position_embeddings"]
    else:
        model_dir = os.path.join(work, name)
        os.makedirs(model_dir, exist_ok=True)
        make_random_model(name, model_dir, args.init_range, args.layers)
        torch.cuda.empty_cache()
        fields = SHAPES[name]
        vocab, bos = fields["vocab_size"], fields["bos_token_id"]
        max_pos = fields["max_position_embeddings"]
    g = torch.Generator().manual_seed(1)
    longest = min(200, max_pos - args.max_tokens - 1)
    prompts = [[bos] + torch.randint(3, vocab, (int(n),), generator=g).tolist()
               for n in torch.randint(4, longest, (args.num_prompts,), generator=g)]
    pv = pvllm_generate(lib, model_dir, args.device, prompts, args.max_tokens, args.top_k,
                        min(1024, max_pos))
    torch.cuda.empty_cache()
    model = load_hf(model_dir)
    hf = [hf_generate(model, p, args.max_tokens) for p in prompts]
    del model
    torch.cuda.empty_cache()
    if name != "stories260k" and not args.keep:
        shutil.rmtree(model_dir, ignore_errors=True)
    figures = compare(prompts, pv, hf, args.top_k)
    figures["pass"] = figures.pop("pass_")
    return figures


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--lib", default="build/capi/libpvllm.so")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--models", default="stories260k,tinyllama-1.1b,llama-3-8b")
    ap.add_argument("--layers", type=int, default=0, help="fewer layers than the shape has (0 = all)")
    ap.add_argument("--init-range", type=float, default=0.05,
                    help="weight std; larger than HF's 0.02 so the logits are not flat")
    ap.add_argument("--num-prompts", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--keep", help="keep the random models under this folder")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()

    import torch
    import transformers

    if not torch.cuda.is_available():
        sys.exit("hf_compare: no CUDA device for transformers")
    work = args.keep or tempfile.mkdtemp(prefix="pvllm_hf_compare_")
    lib = load_lib(args.lib)
    results = {}
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        if name != "stories260k" and name not in SHAPES:
            sys.exit(f"hf_compare: no model {name!r} (stories260k, {', '.join(SHAPES)})")
        r = run_model(name, args, lib, work)
        results[name] = r
        if "skipped" in r:
            print(f"{name}: skipped ({r['skipped']})")
            continue
        div = "; ".join(f"prompt {d['prompt']} at {d['position']}"
                        f"{'' if d['each_in_others_top_k'] else ' OUTSIDE top-k'}"
                        for d in r["divergences"]) or "none"
        print(f"{name}: {r['identical_sequences']}/{r['num_prompts']} sequences identical, "
              f"divergences: {div}; max |logprob diff| {r['max_abs_logprob_diff']:.4g} over "
              f"{r['positions_compared']} positions: {'PASS' if r['pass'] else 'FAIL'}")
    ok = all(r.get("pass", True) for r in results.values())
    print("PASS" if ok else "FAIL")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({
                "pass": ok, "device": args.device, "gpu": torch.cuda.get_device_name(),
                "rule": f"vLLM check_logprobs_close, top {args.top_k}",
                "num_prompts": args.num_prompts, "max_tokens": args.max_tokens,
                "init_range": args.init_range, "models": results,
                "torch": torch.__version__, "transformers": transformers.__version__,
            }, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
