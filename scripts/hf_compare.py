#!/usr/bin/env python3
"""pvllm on CUDA against Hugging Face transformers, on a GPU machine.

Builds a TinyLlama-1.1B-shaped LlamaForCausalLM with random weights in
transformers, saves it as bf16 safetensors (plus the Llama-2 tokenizer.model
from $PVLLM_SHARED_DIR/models/llama2-tokenizer when present), generates
greedily with pvllm through the C ABI (ctypes) on the requested device, and
scores every generated step with transformers (teacher forcing on pvllm's
tokens, fp32 math over the same bf16 weights):

  * log-probabilities of pvllm's top-k tokens against transformers' at the
    same position: max abs error, and that error relative to the row's
    largest |logit| (log-probs differ from logits by a per-row constant,
    so this is the logit error);
  * greedy tokens: pvllm's token must be transformers' argmax wherever the
    reference's top-2 gap exceeds twice the bound (closer calls are ties
    that bf16 rounding may flip; they are counted and printed).

Exits 1 past the bound (--rel-tol, default 5e-2: bf16 activations through 22
layers drift by a few percent of the logit scale), 0 otherwise. --json PATH
writes the figures (and whether they passed) there as well.

Usage: scripts/hf_compare.py --lib build/capi/libpvllm.so [--device cuda] [--json out.json]
Needs torch and transformers (and a CUDA GPU for the reference, else CPU).
"""
import argparse
import ctypes as C
import json
import math
import os
import shutil
import sys
import tempfile


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


def make_model(out_dir, layers, init_range):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    # TinyLlama-1.1B's shape: 22 layers, hidden 2048, 32 heads, 4 kv heads.
    config = LlamaConfig(
        vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=layers,
        num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=2048,
        rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
        initializer_range=init_range, bos_token_id=1, eos_token_id=2,
        torch_dtype="bfloat16")
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out_dir, safe_serialization=True)
    shared = os.environ.get("PVLLM_SHARED_DIR")
    tok = os.path.join(shared, "models", "llama2-tokenizer", "tokenizer.model") if shared else ""
    if tok and os.path.exists(tok):
        shutil.copy(tok, os.path.join(out_dir, "tokenizer.model"))
    return model


def pvllm_generate(lib, model_dir, device, prompts, max_tokens, top_k, max_model_len=1024):
    params = EngineParams()
    lib.pvllm_engine_params_init(C.byref(params), C.sizeof(params))
    params.model_path = model_dir.encode()
    params.device = device.encode()
    params.max_model_len = max_model_len
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--lib", default="build/capi/libpvllm.so")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--layers", type=int, default=22)
    ap.add_argument("--init-range", type=float, default=0.05,
                    help="weight std; larger than HF's 0.02 so the logits are not flat")
    ap.add_argument("--num-prompts", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--top-k", type=int, default=20)
    ap.add_argument("--rel-tol", type=float, default=5e-2)
    ap.add_argument("--keep", help="save the model here instead of a temp dir")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()

    import torch

    model_dir = args.keep or tempfile.mkdtemp(prefix="pvllm_hf_compare_")
    os.makedirs(model_dir, exist_ok=True)
    model = make_model(model_dir, args.layers, args.init_range)
    ref_device = "cuda" if torch.cuda.is_available() else "cpu"
    model = model.float().to(ref_device).eval()

    g = torch.Generator().manual_seed(1)
    prompts = [[1] + torch.randint(3, 32000, (int(n),), generator=g).tolist()
               for n in torch.randint(4, 200, (args.num_prompts,), generator=g)]
    lib = load_lib(args.lib)
    results = pvllm_generate(lib, model_dir, args.device, prompts, args.max_tokens, args.top_k)
    if args.device.startswith("cuda"):
        torch.cuda.empty_cache()

    worst_abs = worst_rel = 0.0
    num_checked = num_ties = num_mismatch = 0
    for p, r in zip(prompts, results):
        seq = torch.tensor([p + r["tokens"]], device=ref_device)
        with torch.no_grad():
            logits = model(seq).logits[0].float()
        for t, tok in enumerate(r["tokens"]):
            row = logits[len(p) - 1 + t]
            lp = torch.log_softmax(row, dim=-1)
            scale = row.abs().max().item()
            for tid, v in r["top"][t].items():
                err = abs(v - lp[tid].item())
                worst_abs = max(worst_abs, err)
                worst_rel = max(worst_rel, err / max(scale, 1e-6))
            top2 = torch.topk(row, 2)
            gap = (top2.values[0] - top2.values[1]).item() / max(scale, 1e-6)
            if gap > 2 * args.rel_tol:
                num_checked += 1
                if top2.indices[0].item() != tok:
                    num_mismatch += 1
            else:
                num_ties += 1
    n_steps = sum(len(r["tokens"]) for r in results)
    print(f"prompts {len(prompts)}, steps {n_steps}, top-{args.top_k} log-probs compared")
    print(f"logprob max abs error {worst_abs:.4g}, relative to the logit scale {worst_rel:.4g} "
          f"(bound {args.rel_tol})")
    print(f"greedy tokens: {num_checked - num_mismatch}/{num_checked} equal where decisive, "
          f"{num_ties} near ties not judged")
    ok = worst_rel <= args.rel_tol and num_mismatch == 0
    print("PASS" if ok else "FAIL")
    if args.json:
        import transformers

        with open(args.json, "w") as f:
            json.dump({
                "pass": ok, "device": args.device, "reference_device": ref_device,
                "shape": "TinyLlama-1.1B", "layers": args.layers, "init_range": args.init_range,
                "num_prompts": len(prompts), "num_steps": n_steps, "top_k": args.top_k,
                "logprob_max_abs_error": worst_abs,
                "logprob_max_error_relative_to_logit_scale": worst_rel,
                "rel_tol": args.rel_tol, "greedy_decisive": num_checked,
                "greedy_mismatches": num_mismatch, "greedy_near_ties": num_ties,
                "torch": torch.__version__, "transformers": transformers.__version__,
            }, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
