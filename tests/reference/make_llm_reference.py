#!/usr/bin/env python3
"""make_llm_reference.py - llama.cpp reference logits/generations for a GGUF LLM.

Reference implementation: llama.cpp through llama-cpp-python (PyPI), CPU only.
Writes tests/reference/llm/gemma3_270m.json (or the path given with --out;
tests/reference/llm/smollm2_135m.json comes from
models/smollm2-135m-instruct-q4_1.gguf, its chat prompt in ChatML):

  meta: versions, model file name/size, n_vocab, n_ctx, n_batch, threads, seed,
        KV cache type, flash attention, CPU flags, llama.cpp system info
  prompts[i]:
    name, text            - the prompt text (UTF-8)
    prompt_ids            - llm.tokenize(text.encode(), add_bos=True, special=True)
    greedy_ids            - 64 tokens of greedy (argmax, no penalties) continuation,
                            decoded incrementally (prompt in one batch, then one
                            token per decode); EOG tokens are NOT treated as stop
                            tokens (generation runs on through them)
    greedy_text           - llama.cpp detokenization of greedy_ids
    greedy_first_eog      - index into greedy_ids of the first end-of-generation
                            token (llama_vocab_is_eog), or null
    greedy_gaps           - top-1 minus top-2 logit at each greedy step (small gaps
                            mark steps where another implementation may legitimately
                            pick a different token)
    seq_ids               - prompt_ids + greedy continuation, extended so that
                            len(seq_ids) >= 200 (the continuation is the same
                            greedy run, so seq_ids[n_prompt:n_prompt+64] == greedy_ids)
    n_prompt              - len(prompt_ids)
    teacher forced logits: seq_ids evaluated in ONE llama_decode call (one ubatch),
    all logits requested. For every position p in 0..len(seq_ids)-1 (logits at p
    predict token p+1):
      top_ids[p]          - 10 token ids with the largest logits, by logit
                            descending, ties by id ascending
      top_logits[p]       - their logits (float32, rounded to 5 decimals)
      logsumexp[p]        - log(sum_v exp(logit_v)) over the full vocabulary
                            (float64 computation, rounded to 5 decimals), so
                            log-prob = logit - logsumexp

    noise_floor         - only where repacking changes nothing (the run above is
                            then the default one bit for bit): llama.cpp with
                            flash attention on, scored the same way (totals in
                            meta); the floor the tests use when present
    llama_cpp_without_repacking - the noise floor of any comparison with this
                            run: llama.cpp itself with weight repacking off
                            (use_extra_bufts = false; only the order of float
                            operations changes), scored like inferd is: top-1
                            agreement, max/mean |diff| over the top-10, greedy
                            identical prefix (totals in meta)

Settings: n_threads = n_threads_batch = 2, n_ctx = 512, n_batch = n_ubatch = 512,
KV cache F32 (type_k = type_v = GGML_TYPE_F32), flash attention off, seed 1234
(unused by greedy decoding), no GPU offload.

Usage:
  /root/.cache/inferd/ref-venv/bin/python tests/reference/make_llm_reference.py \
      [MODEL.gguf] [--out OUT.json]
Default model: models/gemma-3-270m-q4_k_m.gguf (relative to the repo root).
"""
import argparse
import ctypes
import json
import os
import platform
import sys

# ggml's CPU backend uses OpenMP; with busy-waiting threads a loaded machine slows
# decoding down ~50x. Passive waiting changes scheduling only, not results (every
# output element is computed by exactly one thread). Must be set before libgomp loads.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import numpy as np
import llama_cpp
from llama_cpp import Llama

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

N_THREADS = 2
N_CTX = 512
N_BATCH = 512
SEED = 1234
MIN_SEQ = 200
N_GREEDY = 64
TOPK = 10
GGML_TYPE_F32 = 0

PROMPTS = [
    ("english_prose",
     "The old lighthouse keeper climbed the spiral staircase every evening, "
     "carrying a lantern and a thermos of tea. From the top, he could see the "
     "fishing boats returning to the harbour as the sun sank behind the hills."),
    ("question",
     "Why is the sky blue during the day but red and orange at sunset?"),
    ("code",
     "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
     "    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n"
     "    return a\n\n\ndef main():\n"),
    ("list",
     "Shopping list for the weekend:\n1. Eggs\n2. Whole wheat bread\n3. "
     "Tomatoes\n4. Olive oil\n5."),
    ("german",
     "Die Katze schläft auf dem warmen Fensterbrett, während draußen der Regen "
     "gegen die Scheiben prasselt. Übermorgen soll es endlich wieder sonnig werden, "
     "sagte der Wetterbericht."),
    ("french",
     "Il était une fois, dans un petit village au bord de la mer, une jeune fille "
     "qui rêvait de voyager à travers le monde. Chaque matin, elle regardait les "
     "navires qui partaient vers l'horizon."),
    ("chinese",
     "春天来了，公园里的花都开了。孩子们在草地上放风筝，老人们坐在长椅上聊天。"
     "今天的天气非常好，我们决定去"),
    ("emoji",
     "Had the best day ever 🎉🎉 Went to the beach 🏖️ with my family 👨‍👩‍👧‍👦, "
     "ate ice cream 🍦🍓 and watched the sunset 🌅❤️. Can't wait for tomorrow! 😄👍🏽"),
    ("math",
     "Compute step by step: 17 * 23 = 391, 391 + 1024 = 1415, 1415 / 5 = 283. "
     "Now 3.14159 * 2 = 6.28318 and 2^10 = 1024. Next, 123456789 - 98765432 ="),
    ("chat",
     "<start_of_turn>user\nWrite a haiku about autumn leaves.<end_of_turn>\n"
     "<start_of_turn>model\n"),
]

# The chat prompt in the model's own template: ChatML for SmolLM2 (its
# tokenizer.chat_template), Gemma 3's turns otherwise.
CHATML = ("<|im_start|>user\nWrite a haiku about autumn leaves.<|im_end|>\n"
          "<|im_start|>assistant\n")


def prompts_for(model_path):
    if "smollm" in os.path.basename(model_path).lower():
        return [(n, CHATML if n == "chat" else t) for n, t in PROMPTS]
    return PROMPTS


def cpu_flags():
    flags = []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    break
    except OSError:
        pass
    keep = ("sse", "ssse3", "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c",
            "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni",
            "avx512_bf16", "avx_vnni", "amx_tile", "neon", "asimd")
    return [f for f in flags if f in keep]


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def r5(x):
    return float(round(float(x), 5))


def topk_row(row):
    # logit descending, id ascending for ties
    idx = np.lexsort((np.arange(row.shape[0]), -row.astype(np.float64)))[:TOPK]
    return [int(i) for i in idx], [r5(row[i]) for i in idx]


def logsumexp(row):
    r = row.astype(np.float64)
    m = r.max()
    return float(m + np.log(np.exp(r - m).sum()))


def load(model_path, flash_attn=False):
    return Llama(model_path=model_path, n_ctx=N_CTX, n_batch=N_BATCH, n_ubatch=N_BATCH,
                 n_threads=N_THREADS, n_threads_batch=N_THREADS, seed=SEED,
                 logits_all=True, n_gpu_layers=0, flash_attn=flash_attn,
                 type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32, verbose=False)


def load_without_repacking(model_path):
    """The same model with llama.cpp's weight repacking off (model param
    use_extra_bufts = false): Q4_K matrices then go through ggml's generic
    vec_dot kernels instead of the interleaved Q4_Kx8 GEMM. Same file, same
    build, same machine; only the order of float operations changes."""
    import llama_cpp.llama as llama_mod
    default = llama_mod.llama_cpp.llama_model_default_params

    def no_repack():
        p = default()
        p.use_extra_bufts = False
        return p
    llama_mod.llama_cpp.llama_model_default_params = no_repack
    try:
        return load(model_path)
    finally:
        llama_mod.llama_cpp.llama_model_default_params = default


def self_consistency(llm_alt, prompts):
    """llama.cpp against itself: the run without weight repacking compared
    with the default run the way inferd is compared with it (top-1
    agreement and |logit diff| on the default run's top-10 at every
    teacher-forced position; greedy tokens identical before the first
    divergence). This is the noise floor of the comparison."""
    out = []
    for pr in prompts:
        seq = pr["seq_ids"]
        logits = teacher_forced(llm_alt, seq)
        agree, diffs = 0, []
        for p in range(len(seq)):
            agree += int(np.argmax(logits[p]) == pr["top_ids"][p][0])
            diffs += [abs(float(logits[p][i]) - v)
                      for i, v in zip(pr["top_ids"][p], pr["top_logits"][p])]
        gen, _ = greedy(llm_alt, pr["prompt_ids"], N_GREEDY)
        same = next((i for i in range(N_GREEDY) if gen[i] != pr["greedy_ids"][i]), N_GREEDY)
        out.append({"name": pr["name"], "positions": len(seq), "top1_agree": agree,
                    "max_abs_diff": r5(max(diffs)), "mean_abs_diff": r5(np.mean(diffs)),
                    "greedy_identical_prefix": same})
        print(f"self-consistency {pr['name']}: top-1 {agree}/{len(seq)}, "
              f"greedy identical prefix {same}", file=sys.stderr)
    return out


def floor_totals(runs, what):
    """meta's totals of self_consistency's per-prompt results."""
    return {
        "what": what,
        "positions": sum(a["positions"] for a in runs),
        "top1_agree": sum(a["top1_agree"] for a in runs),
        "greedy_identical": sum(1 for a in runs if a["greedy_identical_prefix"] == N_GREEDY),
        "max_abs_diff": max(a["max_abs_diff"] for a in runs),
        "mean_abs_diff": r5(np.mean([a["mean_abs_diff"] for a in runs])),
    }


def greedy(llm, prompt_ids, n):
    """returns (tokens, gaps): gaps[i] = top1 - top2 logit at greedy step i"""
    llm.reset()
    llm.eval(prompt_ids)
    out, gaps = [], []
    for _ in range(n):
        row = llm.scores[llm.n_tokens - 1]
        tok = int(np.argmax(row))  # first max, like llama.cpp's greedy sampler
        top2 = np.partition(row, -2)[-2:]
        gaps.append(r5(float(top2[1]) - float(top2[0])))
        out.append(tok)
        llm.eval([tok])
    return out, gaps


def teacher_forced(llm, ids):
    llm.reset()
    llm.eval(ids)  # len(ids) <= n_batch: one llama_decode, one ubatch
    logits = np.array(llm.scores[:len(ids)], dtype=np.float32)
    assert np.isfinite(logits).all()
    return logits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?",
                    default=os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "reference", "llm",
                                                  "gemma3_270m.json"))
    args = ap.parse_args()

    llm = load(args.model)
    n_vocab = llm.n_vocab()
    vocab = llm._model.vocab if hasattr(llm._model, "vocab") else None

    def is_eog(t):
        return bool(llama_cpp.llama_vocab_is_eog(llm._model.vocab, t)) if vocab is not None \
            else t == llm.token_eos()

    prompts = []
    total_pos = 0
    for name, text in prompts_for(args.model):
        pids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
        assert len(pids) < MIN_SEQ
        n_gen = max(N_GREEDY, MIN_SEQ - len(pids))
        gen, gaps = greedy(llm, pids, n_gen)
        seq = pids + gen
        g64 = gen[:N_GREEDY]
        first_eog = next((i for i, t in enumerate(g64) if is_eog(t)), None)
        logits = teacher_forced(llm, seq)
        top_ids, top_logits, lse = [], [], []
        for p in range(len(seq)):
            i, l = topk_row(logits[p])
            top_ids.append(i)
            top_logits.append(l)
            lse.append(r5(logsumexp(logits[p])))
        # how often the one-shot (batched) argmax agrees with the incremental greedy token
        agree = sum(1 for p in range(len(pids) - 1, len(seq) - 1) if top_ids[p][0] == seq[p + 1])
        total_pos += len(seq)
        prompts.append({
            "name": name,
            "text": text,
            "prompt_ids": pids,
            "n_prompt": len(pids),
            "greedy_ids": g64,
            "greedy_text": llm.detokenize(g64).decode("utf-8", errors="replace"),
            "greedy_first_eog": first_eog,
            "greedy_gaps": gaps[:N_GREEDY],
            "seq_ids": seq,
            "n_seq": len(seq),
            "teacher_forced_argmax_matches_greedy": agree,
            "top_ids": top_ids,
            "top_logits": top_logits,
            "logsumexp": lse,
        })
        print(f"{name}: prompt {len(pids)} tokens, seq {len(seq)}, "
              f"argmax agreement {agree}/{len(seq) - len(pids)}", file=sys.stderr)

    alt = self_consistency(load_without_repacking(args.model), prompts)
    for pr, a in zip(prompts, alt):
        pr["llama_cpp_without_repacking"] = a
    # Where repacking changes nothing (no repacked kernels for the file's
    # types: SmolLM2's Q4_1), that run is the default one bit for bit and
    # gives no floor; llama.cpp with flash attention on (the attention's
    # sums in another order, the same file and build) is the floor then.
    floor = None
    if all(a["top1_agree"] == a["positions"] and a["mean_abs_diff"] == 0 for a in alt):
        print("repacking changes nothing here: noise floor from flash attention on",
              file=sys.stderr)
        floor = self_consistency(load(args.model, flash_attn=True), prompts)
        for pr, a in zip(prompts, floor):
            pr["noise_floor"] = a

    meta = {
        "generator": "tests/reference/make_llm_reference.py",
        "reference": "llama.cpp via llama-cpp-python",
        "llama_cpp_python_version": llama_cpp.__version__,
        "llama_cpp_commit": llama_cpp_commit(),
        "ggml_version": ggml_build()[0],
        "ggml_commit": ggml_build()[1],
        "model_file": os.path.basename(args.model),
        "model_size_bytes": os.path.getsize(os.path.realpath(args.model)),
        "n_vocab": n_vocab,
        "n_ctx": N_CTX,
        "n_batch": N_BATCH,
        "n_ubatch": N_BATCH,
        "n_threads": N_THREADS,
        "n_threads_batch": N_THREADS,
        "seed": SEED,
        "kv_cache_type": "f32",
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "flash_attn": False,
        "n_gpu_layers": 0,
        "topk": TOPK,
        "rounding": "logits and logsumexp rounded to 5 decimals",
        "bos_id": llm.token_bos(),
        "eos_id": llm.token_eos(),
        "total_positions": total_pos,
        "cpu_model": cpu_model(),
        "cpu_flags": cpu_flags(),
        "system_info": llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
        "machine": platform.machine(),
        "llama_cpp_without_repacking": floor_totals(
            alt, "llama.cpp with model param use_extra_bufts=false (no weight "
                 "repacking) against the default run: the comparison's noise floor"),
    }
    if floor is not None:
        meta["noise_floor"] = floor_totals(
            floor, "llama.cpp with flash attention on against the default run (weight "
                   "repacking changes nothing for this file's tensor types): the "
                   "comparison's noise floor")
    out = {"meta": meta, "prompts": prompts}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {args.out}: {total_pos} positions, {os.path.getsize(args.out)} bytes",
          file=sys.stderr)


# llama.cpp commit vendored by the llama-cpp-python release (from its sdist's
# vendor/llama.cpp checkout); llama-cpp-python does not expose it at run time.
KNOWN_COMMITS = {"0.3.36": "0c1e57098bba43ac29e6e3b677cdceebdd22334f"}


def llama_cpp_commit():
    return KNOWN_COMMITS.get(llama_cpp.__version__, "unknown")


def ggml_build():
    """(ggml_version, ggml_commit) of the libggml bundled with llama-cpp-python;
    the commit is llama.cpp's vendored checkout (git short hash)."""
    try:
        lib = ctypes.CDLL(os.path.join(os.path.dirname(llama_cpp.__file__), "lib",
                                       "libggml-base.so"))
        lib.ggml_version.restype = ctypes.c_char_p
        lib.ggml_commit.restype = ctypes.c_char_p
        return lib.ggml_version().decode(), lib.ggml_commit().decode()
    except (OSError, AttributeError):
        return "unknown", "unknown"


if __name__ == "__main__":
    main()
