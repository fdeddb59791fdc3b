#!/usr/bin/env python3
"""make_tiny_models.py - tiny random GGUF models + llama.cpp reference logits.

Writes tests/reference/llm/tiny/<arch>_<type>.gguf and <arch>_<type>.json for
arch in {llama, qwen2, gemma3} and type in {f32, f16, q8_0, q4_k, q6_k}; gemma2
(soft-capped attention and logits), granite (embedding, attention, residual and
logit scales), qwen3 (per-head q/k norms), olmo2 (no pre-norms, whole-width q/k
norms) and phi3 (fused attn_qkv and gate/up) in f32 and q8_0; plus
gemma3_q5_0 (Q5_0 is what llama.cpp's Q4_K_M mix falls back to, and the default
gemma-3-270m-q4_k_m.gguf has 81 Q5_0 tensors) and llama_<type> for q4_1, q5_1,
q2_k, q3_k, iq4_nl and iq4_xs. Also writes tiny/index.json.

How the files are made
  * An F32 "master" model per (arch, family) is written with gguf.GGUFWriter from
    deterministic numpy random weights (seeded per arch and family).
  * Every other type is produced from that master by llama.cpp's own quantizer
    (llama_model_quantize via llama-cpp-python, pure=True: every 2-D *.weight
    tensor gets the target type, norms / biases stay F32). gguf.quants has no
    Q4_K/Q6_K quantizer, and llama.cpp's quantizer is the reference anyway.
  * Two dimension families (K-quants need rows that are multiples of 256, while
    F32 files at n_embd 256 would be far too big to commit):
      s (f32, f16, q8_0, q5_0, q4_1, q5_1, iq4_nl): n_embd 64,  n_ff 128, 2 layers
      k (q4_k, q6_k, q2_k, q3_k, iq4_xs):         n_embd 256, n_ff 256, every 2-D
                                tensor's ne0 % 256 == 0,
                                1 layer (llama, qwen2) / 2 layers (gemma3), to keep the
                                committed files small
    heads 4, kv heads 2 (GQA); head_dim n_embd/4 (llama, qwen2), 32 / 64 (gemma3,
    set by gemma3.attention.key_length, so gemma3's q width 4*head_dim != n_embd)
    Files of the same family and arch hold the same weights up to quantization,
    so e.g. llama_f16 logits are close to llama_f32 logits.
  * gemma3 uses a sliding window of 4 and gemma3.attention.sliding_window_pattern
    = 2, so layer 0 is local (SWA, rope base 10000 = llama.cpp default, no
    gemma3.rope.freq_base_swa key) and layer 1 is global (rope base from
    gemma3.rope.freq_base = 1e6).

For each model file the JSON records:
  metadata        every GGUF key/value as read back from the written file (arrays in full)
  metadata_types  GGUF value type of each key ("ARRAY[INT32]" etc.)
  tensors         name, ggml type, ne (GGML order: ne[0] is the row length)
  sequences       3 fixed token sequences of length 32, each evaluated in one
                  llama_decode (logits for all positions):
                    ids, logits_b64 (float32 little-endian, row-major [32][n_vocab],
                    base64), argmax, logsumexp,
                    greedy_ids: 16 greedy (argmax) tokens after the sequence,
                    decoded one token per llama_decode; greedy_gaps: top-1 minus
                    top-2 logit at each greedy step
  settings        llama.cpp context settings used (n_ctx, threads, KV cache F32,
                  flash attention off)

Usage:
  /root/.cache/inferd/ref-venv/bin/python tests/reference/make_tiny_models.py [OUT_DIR]
"""
import base64
import ctypes
import json
import os
import shutil
import sys
import tempfile

# ggml's CPU backend uses OpenMP; with busy-waiting threads a loaded machine slows
# decoding down ~50x. Passive waiting changes scheduling only, not results (every
# output element is computed by exactly one thread). Must be set before libgomp loads.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import numpy as np
import gguf
from gguf import GGUFReader, GGUFWriter, GGMLQuantizationType
import llama_cpp
from llama_cpp import Llama

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIR = os.path.join(ROOT, "tests", "reference", "llm", "tiny")

N_VOCAB = 272          # 256 byte tokens + 16 control/normal tokens
N_CTX_TRAIN = 256
SEQ_LEN = 32
N_GREEDY = 16
N_THREADS = 2
N_CTX = 64
GGML_TYPE_F32 = 0

FAMILIES = {
    "s": dict(n_embd=64, n_ff=128),
    "k": dict(n_embd=256, n_ff=256),
}

# (llama_ftype, family) per output type
TYPES = {
    "f32":  (None, "s"),
    "f16":  (1, "s"),    # LLAMA_FTYPE_MOSTLY_F16
    "q8_0": (7, "s"),    # LLAMA_FTYPE_MOSTLY_Q8_0
    "q5_0": (8, "s"),    # LLAMA_FTYPE_MOSTLY_Q5_0
    "q4_1": (3, "s"),    # LLAMA_FTYPE_MOSTLY_Q4_1
    "q5_1": (9, "s"),    # LLAMA_FTYPE_MOSTLY_Q5_1
    "q4_k": (14, "k"),   # LLAMA_FTYPE_MOSTLY_Q4_K_S (+ pure => every weight Q4_K)
    "q6_k": (18, "k"),   # LLAMA_FTYPE_MOSTLY_Q6_K
    "q2_k": (10, "k"),   # LLAMA_FTYPE_MOSTLY_Q2_K (+ pure => every weight Q2_K)
    "q3_k": (11, "k"),   # LLAMA_FTYPE_MOSTLY_Q3_K_S (+ pure => every weight Q3_K)
    "iq4_nl": (25, "s"), # LLAMA_FTYPE_MOSTLY_IQ4_NL
    "iq4_xs": (30, "k"), # LLAMA_FTYPE_MOSTLY_IQ4_XS
}
# Q5_0 is not one of the target types, but llama.cpp's Q4_K_M mix falls back to it
# for rows that are not a multiple of 256 (81 of the 236 tensors of
# gemma-3-270m-q4_k_m.gguf are Q5_0), so one tiny gemma3 file carries it
# Q4_1 (SmolLM2-135M-Instruct's type), Q5_1, Q2_K, Q3_K, IQ4_NL and IQ4_XS on one
# llama file each.
ONLY_FOR = {"q5_0": ("gemma3",), "q4_1": ("llama",), "q5_1": ("llama",), "q2_k": ("llama",),
            "q3_k": ("llama",), "iq4_nl": ("llama",), "iq4_xs": ("llama",)}
EXPECTED_GGML_TYPE = {"f16": "F16", "q8_0": "Q8_0", "q5_0": "Q5_0", "q4_k": "Q4_K", "q6_k": "Q6_K",
                      "f32": "F32", "q4_1": "Q4_1", "q5_1": "Q5_1", "q2_k": "Q2_K",
                      "q3_k": "Q3_K", "iq4_nl": "IQ4_NL", "iq4_xs": "IQ4_XS"}

ARCHS = {
    "llama": dict(n_layer={"s": 2, "k": 1}, n_head=4, n_head_kv=2, head_dim=None, rms_eps=1e-5,
                  rope_base=500000.0, tied=False, seed=101),
    "qwen2": dict(n_layer={"s": 2, "k": 1}, n_head=4, n_head_kv=2, head_dim=None, rms_eps=1e-6,
                  rope_base=1000000.0, tied=True, seed=202),
    # gemma3: head_dim 32 (s) / 64 (k) given by key_length, q_dim = 4*head_dim
    "gemma3": dict(n_layer={"s": 2, "k": 2}, n_head=4, n_head_kv=2, head_dim={"s": 32, "k": 64}, rms_eps=1e-6,
                   rope_base=1000000.0, tied=True, seed=303, sliding_window=4, swa_pattern=2),
    # gemma2: gemma3's layout less the q/k norms; soft caps far below the real
    # model's 50 / 30 so that they shape these logits (scores and logits of a few units)
    "gemma2": dict(n_layer={"s": 2}, n_head=4, n_head_kv=2, head_dim={"s": 32}, rms_eps=1e-6,
                   rope_base=10000.0, tied=True, seed=404, sliding_window=4, swa_pattern=2,
                   attn_softcap=2.0, final_softcap=3.0),
    # granite: llama plus its four scales (granite 3.x style values, attention
    # scale unlike 1/sqrt(head_dim))
    "granite": dict(n_layer={"s": 2}, n_head=4, n_head_kv=2, head_dim=None, rms_eps=1e-5,
                    rope_base=10000.0, tied=False, seed=505, embedding_scale=4.0,
                    residual_scale=0.5, attention_scale=0.15, logit_scale=2.0),
    # qwen3: qwen2 less the biases, plus per-head q/k RMSNorm
    "qwen3": dict(n_layer={"s": 2}, n_head=4, n_head_kv=2, head_dim=None, rms_eps=1e-6,
                  rope_base=1000000.0, tied=True, seed=606),
    # olmo2: no pre-norms; q/k RMSNorm over the whole q / k width; post norms
    "olmo2": dict(n_layer={"s": 2}, n_head=4, n_head_kv=2, head_dim=None, rms_eps=1e-6,
                  rope_base=500000.0, tied=False, seed=707),
    # phi3: q/k/v in one attn_qkv tensor, gate and up in one ffn_up (gate rows first)
    "phi3": dict(n_layer={"s": 2}, n_head=4, n_head_kv=2, head_dim=None, rms_eps=1e-5,
                 rope_base=10000.0, tied=False, seed=808),
}
# architectures checked only in float32 and Q8_0 (their arithmetic, not the
# types again), on the small family
ARCH_TYPES = {a: ("f32", "q8_0") for a in ("gemma2", "granite", "qwen3", "olmo2", "phi3")}


# ---------------------------------------------------------------- tokenizers

def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def spm_vocab(arch):
    """tokenizer.ggml.model = llama (SentencePiece-style) with byte tokens."""
    if arch.startswith("gemma"):
        specials = [("<pad>", 3), ("<eos>", 3), ("<bos>", 3), ("<unk>", 2),
                    ("<start_of_turn>", 3), ("<end_of_turn>", 3)]
        ids = dict(pad=0, eos=1, bos=2, unk=3)
    else:
        specials = [("<unk>", 2), ("<s>", 3), ("</s>", 3)]
        if arch == "phi3":  # llama.cpp's vocab loader looks it up for phi3 files
            specials.append(("<|endoftext|>", 3))
        ids = dict(unk=0, bos=1, eos=2)
    toks, scores, types = [], [], []
    for t, ty in specials:
        toks.append(t); scores.append(0.0); types.append(ty)
    for b in range(256):
        toks.append("<0x%02X>" % b); scores.append(0.0); types.append(6)
    pieces = ["\u2581", "\u2581t", "he", "\u2581the", "\u2581a", "in", "er", "on", "re",
              "\u2581s", "at", "en", "\u2581and", "or", "es", "\u2581o"]
    i = 0
    while len(toks) < N_VOCAB:
        toks.append(pieces[i]); scores.append(-float(i + 1)); types.append(1)
        i += 1
    return toks, scores, types, ids


def bpe_vocab():
    """tokenizer.ggml.model = gpt2 (byte-level BPE, pre-tokenizer qwen2)."""
    b2u = bytes_to_unicode()
    toks = [b2u[b] for b in range(256)]
    merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "r e", "Ġ s", "a t",
              "e n", "n d", "Ġa nd"]
    for m in merges:
        toks.append(m.replace(" ", ""))
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    assert len(toks) + len(specials) == N_VOCAB
    types = [1] * len(toks) + [3] * len(specials)
    toks += specials
    ids = dict(bos=256 + len(merges), eos=256 + len(merges) + 2, pad=256 + len(merges))
    return toks, types, merges, ids


# ---------------------------------------------------------------- weights

def make_weights(arch, fam):
    cfg = ARCHS[arch]
    d = FAMILIES[fam]
    n_embd, n_ff = d["n_embd"], d["n_ff"]
    n_head, n_head_kv = cfg["n_head"], cfg["n_head_kv"]
    hd = cfg["head_dim"][fam] if isinstance(cfg["head_dim"], dict) else n_embd // n_head
    q_dim, kv_dim = n_head * hd, n_head_kv * hd
    rng = np.random.default_rng(cfg["seed"] * 10 + (0 if fam == "s" else 1))

    def mat(n_out, n_in, gain=1.0):
        # numpy shape (n_out, n_in) == GGML ne = {n_in, n_out}
        return (rng.standard_normal((n_out, n_in)) * gain / np.sqrt(n_in)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    t = {}
    if arch == "granite":
        # scaled by embedding_scale on input: rms 3/sqrt(n_embd) after it, as llama's
        emb_std = 3.0 / cfg["embedding_scale"] / np.sqrt(n_embd)
    elif arch.startswith("gemma"):
        # llama.cpp scales gemma input embeddings by sqrt(n_embd): keep the scaled
        # residual at rms ~1 so that the (post-normed) layer outputs are not swamped;
        # output_norm ~2 then gives tied logits with std ~2
        emb_std = 1.0 / np.sqrt(n_embd)
    elif cfg["tied"]:
        # tied output (qwen2): a smaller embedding (std 1.5/sqrt(n_embd)) keeps the
        # "predict the input token" term from dominating; output_norm ~2 => logit std ~3
        emb_std = 1.5 / np.sqrt(n_embd)
    else:
        # llama: separate output.weight; embedding rms 3/sqrt(n_embd)
        emb_std = 3.0 / np.sqrt(n_embd)
    t["token_embd.weight"] = (rng.standard_normal((N_VOCAB, n_embd)) * emb_std).astype(np.float32)
    n_layer = cfg["n_layer"][fam]
    for il in range(n_layer):
        p = f"blk.{il}."
        if arch != "olmo2":
            t[p + "attn_norm.weight"] = norm(n_embd)
        wq, wk, wv = mat(q_dim, n_embd, 1.5), mat(kv_dim, n_embd, 1.5), mat(kv_dim, n_embd)
        if arch == "phi3":
            t[p + "attn_qkv.weight"] = np.concatenate([wq, wk, wv], axis=0)
        else:
            t[p + "attn_q.weight"], t[p + "attn_k.weight"], t[p + "attn_v.weight"] = wq, wk, wv
        if arch == "qwen2":
            t[p + "attn_q.bias"] = (0.3 * rng.standard_normal(q_dim)).astype(np.float32)
            t[p + "attn_k.bias"] = (0.3 * rng.standard_normal(kv_dim)).astype(np.float32)
            t[p + "attn_v.bias"] = (0.3 * rng.standard_normal(kv_dim)).astype(np.float32)
        if arch in ("gemma3", "qwen3"):
            t[p + "attn_q_norm.weight"] = norm(hd)
            t[p + "attn_k_norm.weight"] = norm(hd)
        if arch == "olmo2":
            t[p + "attn_q_norm.weight"] = norm(q_dim)
            t[p + "attn_k_norm.weight"] = norm(kv_dim)
        t[p + "attn_output.weight"] = mat(n_embd, q_dim, 0.7)
        if arch.startswith("gemma") or arch == "olmo2":
            t[p + "post_attention_norm.weight"] = 3.0 * norm(n_embd)  # layer outputs outweigh the embedding
        if arch != "olmo2":
            t[p + "ffn_norm.weight"] = norm(n_embd)
        wg, wu = mat(n_ff, n_embd), mat(n_ff, n_embd)
        if arch == "phi3":
            t[p + "ffn_up.weight"] = np.concatenate([wg, wu], axis=0)
        else:
            t[p + "ffn_gate.weight"], t[p + "ffn_up.weight"] = wg, wu
        t[p + "ffn_down.weight"] = mat(n_embd, n_ff, 0.7)
        if arch.startswith("gemma") or arch == "olmo2":
            t[p + "post_ffw_norm.weight"] = 3.0 * norm(n_embd)  # layer outputs outweigh the embedding
    t["output_norm.weight"] = norm(n_embd) * (2.0 if cfg["tied"] else 1.0)
    if not cfg["tied"]:
        t["output.weight"] = mat(N_VOCAB, n_embd, 3.0)
    dims = dict(n_vocab=N_VOCAB, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer,
                n_head=n_head, n_head_kv=n_head_kv, head_dim=hd, q_dim=q_dim, kv_dim=kv_dim,
                n_ctx_train=N_CTX_TRAIN, tied_embeddings=cfg["tied"])
    return t, dims


def write_f32_master(path, arch, fam, name):
    cfg = ARCHS[arch]
    tensors, dims = make_weights(arch, fam)
    w = GGUFWriter(path, arch)
    w.add_string("general.name", name)
    w.add_uint32("general.file_type", 0)  # LLAMA_FTYPE_ALL_F32
    w.add_uint32(f"{arch}.context_length", N_CTX_TRAIN)
    w.add_uint32(f"{arch}.embedding_length", dims["n_embd"])
    w.add_uint32(f"{arch}.block_count", dims["n_layer"])
    w.add_uint32(f"{arch}.feed_forward_length", dims["n_ff"])
    w.add_uint32(f"{arch}.attention.head_count", dims["n_head"])
    w.add_uint32(f"{arch}.attention.head_count_kv", dims["n_head_kv"])
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", cfg["rms_eps"])
    w.add_float32(f"{arch}.rope.freq_base", cfg["rope_base"])
    if arch in ("llama", "granite", "olmo2", "phi3"):
        w.add_uint32(f"{arch}.rope.dimension_count", dims["head_dim"])
        w.add_uint32(f"{arch}.vocab_size", N_VOCAB)
    if arch.startswith("gemma"):
        w.add_uint32(f"{arch}.attention.key_length", dims["head_dim"])
        w.add_uint32(f"{arch}.attention.value_length", dims["head_dim"])
        w.add_uint32(f"{arch}.attention.sliding_window", cfg["sliding_window"])
        w.add_uint32(f"{arch}.attention.sliding_window_pattern", cfg["swa_pattern"])
    if arch == "gemma2":
        w.add_float32("gemma2.attn_logit_softcapping", cfg["attn_softcap"])
        w.add_float32("gemma2.final_logit_softcapping", cfg["final_softcap"])
    if arch == "granite":
        w.add_float32("granite.embedding_scale", cfg["embedding_scale"])
        w.add_float32("granite.residual_scale", cfg["residual_scale"])
        w.add_float32("granite.attention.scale", cfg["attention_scale"])
        w.add_float32("granite.logit_scale", cfg["logit_scale"])
    # tokenizer
    if arch in ("qwen2", "qwen3"):
        toks, types, merges, ids = bpe_vocab()
        w.add_string("tokenizer.ggml.model", "gpt2")
        w.add_string("tokenizer.ggml.pre", "qwen2")
        w.add_token_list(toks)
        w.add_token_types(types)
        w.add_token_merges(merges)
        w.add_uint32("tokenizer.ggml.bos_token_id", ids["bos"])
        w.add_uint32("tokenizer.ggml.eos_token_id", ids["eos"])
        w.add_uint32("tokenizer.ggml.padding_token_id", ids["pad"])
        w.add_bool("tokenizer.ggml.add_bos_token", False)
    else:
        toks, scores, types, ids = spm_vocab(arch)
        w.add_string("tokenizer.ggml.model", "llama")
        w.add_string("tokenizer.ggml.pre", "default")
        w.add_token_list(toks)
        w.add_token_scores(scores)
        w.add_token_types(types)
        w.add_uint32("tokenizer.ggml.bos_token_id", ids["bos"])
        w.add_uint32("tokenizer.ggml.eos_token_id", ids["eos"])
        w.add_uint32("tokenizer.ggml.unknown_token_id", ids["unk"])
        if "pad" in ids:
            w.add_uint32("tokenizer.ggml.padding_token_id", ids["pad"])
        w.add_bool("tokenizer.ggml.add_bos_token", True)
        w.add_bool("tokenizer.ggml.add_eos_token", False)
        if arch.startswith("gemma"):
            w.add_bool("tokenizer.ggml.add_space_prefix", False)
    for n, a in tensors.items():
        w.add_tensor(n, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dims, ids


def quantize(src, dst, ftype):
    p = llama_cpp.llama_model_quantize_default_params()
    p.nthread = N_THREADS
    p.ftype = ftype
    p.pure = True
    p.quantize_output_tensor = True
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p))
    if rc != 0:
        raise RuntimeError(f"llama_model_quantize({src} -> {dst}, ftype {ftype}) failed: {rc}")


# ---------------------------------------------------------------- read back

def read_metadata(path):
    r = GGUFReader(path)
    meta, mtypes = {}, {}
    for k, f in r.fields.items():
        if k.startswith("GGUF."):
            continue
        v = f.contents()
        if isinstance(v, float):
            v = float(np.float32(v))
        meta[k] = v
        ty = f.types[0].name
        if ty == "ARRAY":
            ty = f"ARRAY[{f.types[1].name}]"
        mtypes[k] = ty
    tensors = [dict(name=t.name, type=t.tensor_type.name, ne=[int(x) for x in t.shape])
               for t in r.tensors]
    return meta, mtypes, tensors


# ---------------------------------------------------------------- llama.cpp run

def sequences(ids):
    rng = np.random.default_rng(4242)
    lo = 3 if "pad" not in ids else 6  # avoid control tokens in the random part
    s0 = [ids["bos"]] + [int(x) for x in rng.integers(lo, N_VOCAB, SEQ_LEN - 1)]
    s1 = [int(x) for x in rng.integers(lo, N_VOCAB, SEQ_LEN)]
    pat = [int(x) for x in rng.integers(lo, N_VOCAB, 7)]
    s2 = [ids["bos"]] + [pat[i % 7] for i in range(SEQ_LEN - 1)]
    return [s0, s1, s2]


def run_llama(path, seqs):
    llm = Llama(model_path=path, n_ctx=N_CTX, n_batch=N_CTX, n_ubatch=N_CTX,
                n_threads=N_THREADS, n_threads_batch=N_THREADS, seed=1234,
                logits_all=True, n_gpu_layers=0, flash_attn=False,
                type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32, verbose=False)
    assert llm.n_vocab() == N_VOCAB
    out = []
    for s in seqs:
        llm.reset()
        llm.eval(s)
        logits = np.array(llm.scores[:len(s)], dtype=np.float32)
        if not np.isfinite(logits).all():
            raise RuntimeError(f"{path}: non-finite logits")
        if float(logits.std(axis=1).min()) < 1e-3:
            raise RuntimeError(f"{path}: (near) constant logits")
        greedy, gaps = [], []
        for _ in range(N_GREEDY):
            row = llm.scores[llm.n_tokens - 1]
            tok = int(np.argmax(row))
            top2 = np.partition(row, -2)[-2:]
            gaps.append(round(float(top2[1]) - float(top2[0]), 6))
            greedy.append(tok)
            llm.eval([tok])
        l64 = logits.astype(np.float64)
        m = l64.max(axis=1)
        lse = m + np.log(np.exp(l64 - m[:, None]).sum(axis=1))
        srt = np.sort(l64, axis=1)
        out.append(dict(
            ids=s,
            logits_shape=[len(s), N_VOCAB],
            logits_dtype="float32-le",
            logits_b64=base64.b64encode(logits.astype("<f4").tobytes()).decode(),
            argmax=[int(x) for x in logits.argmax(axis=1)],
            min_top1_top2_gap=round(float((srt[:, -1] - srt[:, -2]).min()), 6),
            logsumexp=[round(float(x), 6) for x in lse],
            logit_std_mean=round(float(logits.std(axis=1).mean()), 6),
            greedy_ids=greedy,
            greedy_gaps=gaps,
        ))
    del llm
    return out


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


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else OUT_DIR
    os.makedirs(out_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="tinygguf")
    index = []
    try:
        masters = {}
        for arch in ARCHS:
            for fam in ARCHS[arch]["n_layer"]:
                mpath = os.path.join(tmp, f"{arch}_{fam}_f32.gguf")
                dims, ids = write_f32_master(mpath, arch, fam, f"tiny-random-{arch}-{fam}")
                masters[(arch, fam)] = (mpath, dims, ids)
        for arch in ARCHS:
            for tname, (ftype, fam) in TYPES.items():
                if tname in ONLY_FOR and arch not in ONLY_FOR[tname]:
                    continue
                if arch in ARCH_TYPES and tname not in ARCH_TYPES[arch]:
                    continue
                mpath, dims, ids = masters[(arch, fam)]
                base = f"{arch}_{tname}"
                gpath = os.path.join(out_dir, base + ".gguf")
                if ftype is None:
                    shutil.copyfile(mpath, gpath)
                else:
                    quantize(mpath, gpath, ftype)
                meta, mtypes, tensors = read_metadata(gpath)
                for t in tensors:  # every 2-D weight must have the target type
                    if len(t["ne"]) == 2:
                        assert t["type"] == EXPECTED_GGML_TYPE[tname], (gpath, t)
                    else:
                        assert t["type"] == "F32", (gpath, t)
                seqs = run_llama(gpath, sequences(ids))
                rec = dict(
                    generator="tests/reference/make_tiny_models.py",
                    reference="llama.cpp via llama-cpp-python",
                    llama_cpp_python_version=llama_cpp.__version__,
                    llama_cpp_commit={"0.3.36": "0c1e57098bba43ac29e6e3b677cdceebdd22334f"}.get(
                        llama_cpp.__version__, "unknown"),
                    ggml_version=ggml_build()[0],
                    ggml_commit=ggml_build()[1],
                    file=base + ".gguf",
                    file_size=os.path.getsize(gpath),
                    arch=arch,
                    type=tname,
                    family=fam,
                    dims=dims,
                    special_ids=ids,
                    settings=dict(n_ctx=N_CTX, n_batch=N_CTX, n_ubatch=N_CTX,
                                  n_threads=N_THREADS, kv_cache_type="f32", flash_attn=False,
                                  n_gpu_layers=0,
                                  note="each sequence: one llama_decode with all logits; "
                                       "greedy: one token per llama_decode after it"),
                    metadata=meta,
                    metadata_types=mtypes,
                    tensors=tensors,
                    sequences=seqs,
                )
                with open(os.path.join(out_dir, base + ".json"), "w", encoding="utf-8") as f:
                    json.dump(rec, f, ensure_ascii=False, separators=(",", ":"))
                    f.write("\n")
                types_used = sorted({t["type"] for t in tensors})
                index.append(dict(file=base + ".gguf", arch=arch, type=tname, family=fam,
                                  size=rec["file_size"], tensor_types=types_used,
                                  min_gap=min(s["min_top1_top2_gap"] for s in seqs)))
                print(f"{base}: {rec['file_size']} bytes, types {types_used}, "
                      f"greedy0 {seqs[0]['greedy_ids'][:6]}", file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with open(os.path.join(out_dir, "index.json"), "w", encoding="utf-8") as f:
        json.dump(index, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
