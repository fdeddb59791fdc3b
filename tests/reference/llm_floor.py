#!/usr/bin/env python3
"""llm_floor.py - how well llama.cpp itself agrees with a committed LLM
reference (tests/reference/llm/*.json, written by make_llm_reference.py) on
THIS machine, scored the way test_llm.c scores inferd: top-1 agreement at
every teacher-forced position, greedy runs identical over all 64 tokens,
tokens before the first divergence, and the reference's top-1 margin where
a run diverged (greedy_gaps).

Variants, each the same file and llama-cpp-python build as the reference
(make_llm_reference.py's settings: 2 threads, n_ctx 512, one batch, F32 KV
cache):
  default            the reference's own settings, run again here: differs
                     from the file only where this CPU takes other ggml
                     kernels than the machine that wrote it
  flash_attn         flash attention on (the attention's sums in another order)
  without_repacking  weight repacking off (use_extra_bufts = false)
  threads_1          one thread (n_threads = n_threads_batch = 1)
  kv_f16             the KV cache in F16, llama.cpp's own default (the
                     reference keeps it in F32, as inferd does)

These are the noise floors of any comparison with the file: equally valid
computations of the same model that differ from it only in float rounding.

With --write the totals go into the reference file itself, as
meta.llama_cpp_variants {machine, variants: {name: {positions, top1_agree,
greedy_identical, greedy_prefix, worst_margin}}} (nothing else in the file
changes); test_llm.c then holds inferd's greedy runs to the lowest of
them (tests/reference/llm/README.md).

Usage:
  /root/.cache/inferd/ref-venv/bin/python tests/reference/llm_floor.py \
      models/smollm2-135m-instruct-q4_1.gguf tests/reference/llm/smollm2_135m.json [--write]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_llm_reference as ref  # noqa: E402  (sets OMP_WAIT_POLICY first)
from llama_cpp import Llama  # noqa: E402


GGML_TYPE_F16 = 1


def load_with(model_path, threads=ref.N_THREADS, kv=ref.GGML_TYPE_F32):
    return Llama(model_path=model_path, n_ctx=ref.N_CTX, n_batch=ref.N_BATCH,
                 n_ubatch=ref.N_BATCH, n_threads=threads, n_threads_batch=threads,
                 seed=ref.SEED, logits_all=True, n_gpu_layers=0, flash_attn=False,
                 type_k=kv, type_v=kv, verbose=False)


VARIANTS = [
    ("default", lambda m: ref.load(m)),
    ("flash_attn", lambda m: ref.load(m, flash_attn=True)),
    ("without_repacking", ref.load_without_repacking),
    ("threads_1", lambda m: load_with(m, threads=1)),
    ("kv_f16", lambda m: load_with(m, kv=GGML_TYPE_F16)),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("reference")
    ap.add_argument("--only", action="append", help="variant names (default: all)")
    ap.add_argument("--write", action="store_true",
                    help="record the totals in the reference file (meta.llama_cpp_variants)")
    args = ap.parse_args()
    with open(args.reference, encoding="utf-8") as f:
        doc = json.load(f)
    prompts = doc["prompts"]
    totals = {}
    print("machine : %s [%s]" % (ref.cpu_model(), " ".join(ref.cpu_flags())))
    print("file    : %s, %d prompts" % (os.path.basename(args.reference), len(prompts)))
    print("%-18s %12s %9s %8s %12s" % ("variant", "top-1", "greedy", "tokens", "worst margin"))
    for name, loader in VARIANTS:
        if args.only and name not in args.only:
            continue
        runs = ref.self_consistency(loader(args.model), prompts)
        pos = sum(r["positions"] for r in runs)
        agree = sum(r["top1_agree"] for r in runs)
        same = sum(1 for r in runs if r["greedy_identical_prefix"] == ref.N_GREEDY)
        prefix = sum(r["greedy_identical_prefix"] for r in runs)
        worst = max([pr["greedy_gaps"][r["greedy_identical_prefix"]]
                     for pr, r in zip(prompts, runs)
                     if r["greedy_identical_prefix"] < ref.N_GREEDY] or [0.0])
        print("%-18s %5d/%-6d %4d/%-4d %8d %12.3f" % (name, agree, pos, same, len(runs),
                                                    prefix, worst), flush=True)
        totals[name] = {"positions": pos, "top1_agree": agree, "greedy_identical": same,
                        "greedy_prefix": prefix, "worst_margin": worst}
    if args.write:
        doc["meta"]["llama_cpp_variants"] = {
            "generator": "tests/reference/llm_floor.py",
            "machine": "%s [%s]" % (ref.cpu_model(), " ".join(ref.cpu_flags())),
            "variants": totals}
        with open(args.reference, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        print("wrote %s" % args.reference)


if __name__ == "__main__":
    main()
