/* eng_llm_load.c - hyper-parameters and weight views of a GGUF language
 * model. Keys and tensor names follow the GGUF specification and
 * llama.cpp's llama-arch.cpp / llama-model.cpp (per-architecture defaults
 * noted where the file is silent).
 *
 * Loading is straight-line: the steps share one reader (struct el_ld)
 * whose first error sticks; every later step is then a no-op, and
 * eng_llm_load checks the reader once at the end. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"
#include "engine/format/eng_gguf.h"
#include "engine/models/eng_llm_int.h"

static const char *const el_arch_names[ENG_LLM_ARCH_COUNT] = {
	[ENG_LLM_ARCH_LLAMA] = "llama",
	[ENG_LLM_ARCH_QWEN2] = "qwen2",
	[ENG_LLM_ARCH_QWEN3] = "qwen3",
	[ENG_LLM_ARCH_GEMMA3] = "gemma3",
	[ENG_LLM_ARCH_GEMMA2] = "gemma2",
	[ENG_LLM_ARCH_GRANITE] = "granite",
	[ENG_LLM_ARCH_OLMO2] = "olmo2",
	[ENG_LLM_ARCH_PHI3] = "phi3",
};

const char *eng_llm_arch_name(enum eng_llm_arch a)
{
	return a >= 0 && a < ENG_LLM_ARCH_COUNT ? el_arch_names[a] : "unknown";
}

/* Load-time context: the file, the model, and the first error. */
struct el_ld {
	const struct eng_gguf *g;
	struct eng_llm *m;
	const char *arch; /* key prefix, once el_arch has read it */
	int rc;           /* 0, or the first failure: later steps do nothing */
	char *err;        /* the first failure's message */
	size_t errlen;
};

/* el_fail - record rc and the message unless an earlier failure stuck. */
__attribute__((format(printf, 3, 4)))
static void el_fail(struct el_ld *ld, int rc, const char *fmt, ...)
{
	va_list ap;
	if (ld->rc)
		return;
	va_start(ap, fmt);
	ld->rc = st_verrf(rc, ld->err, ld->errlen, NULL, fmt, ap);
	va_end(ap);
}

/* "{arch}.suffix" as an integer (any integer type) or *out = def when
 * absent (def < 0: required). */
static void el_u32(struct el_ld *ld, const char *suffix, int def, int *out)
{
	char key[128];
	uint32_t v;
	if (ld->rc)
		return;
	snprintf(key, sizeof(key), "%s.%s", ld->arch, suffix);
	int rc = eng_gguf_get_u32(ld->g, key, &v);
	if (rc == -ST_NOTFOUND && def >= 0)
		*out = def;
	else if (rc || v == 0 || v > (1u << 30))
		el_fail(ld, -ST_CORRUPT, "%s: missing or out of range", key);
	else
		*out = (int)v;
}

static float el_f32(struct el_ld *ld, const char *suffix, float def)
{
	char key[128];
	float v;
	snprintf(key, sizeof(key), "%s.%s", ld->arch, suffix);
	return eng_gguf_get_f32(ld->g, key, &v) == 0 && isfinite(v) ? v : def;
}

static void el_arch(struct el_ld *ld)
{
	const char *a;
	if (eng_gguf_get_str(ld->g, "general.architecture", &a, NULL)) {
		el_fail(ld, -ST_CORRUPT, "%s: missing", "general.architecture");
		return;
	}
	for (int i = 0; i < ENG_LLM_ARCH_COUNT; i++)
		if (!strcmp(a, el_arch_names[i])) {
			ld->m->hp.arch = (enum eng_llm_arch)i;
			ld->arch = el_arch_names[i];
			return;
		}
	el_fail(ld, -ST_UNSUPPORTED,
		"architecture '%s' is not supported (gemma2, gemma3, granite, llama, olmo2, phi3, "
		"qwen2, qwen3 are)", a);
}

/* Whether the architecture is one of the gemma family (GeGLU, post
 * norms, embeddings scaled by sqrt(n_embd)). */
static bool el_gemma(enum eng_llm_arch a)
{
	return a == ENG_LLM_ARCH_GEMMA2 || a == ENG_LLM_ARCH_GEMMA3;
}

/* Per-architecture settings llama.cpp fixes in code rather than keys. */
static void el_arch_defaults(struct eng_llm_hp *hp)
{
	hp->rope_neox = hp->arch != ENG_LLM_ARCH_LLAMA && hp->arch != ENG_LLM_ARCH_GRANITE;
	hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim_k);
	hp->embd_scale = 1.0f;
	hp->rope_base_swa = hp->rope_base;
	hp->swa_pattern = 1;
	hp->residual_scale = 1.0f;
	hp->logit_scale = 1.0f;
	hp->geglu = el_gemma(hp->arch);
	if (el_gemma(hp->arch))
		hp->embd_scale = sqrtf((float)hp->n_embd);
	if (hp->arch == ENG_LLM_ARCH_GEMMA3) {
		hp->rope_base_swa = 10000.0f; /* llama-model.cpp: rope_freq_base_train_swa */
		hp->swa_pattern = 6;          /* set_swa_pattern(6): every 6th layer global */
	}
	hp->qk_norm_full = hp->arch == ENG_LLM_ARCH_OLMO2;
	if (hp->arch == ENG_LLM_ARCH_OLMO2)
		hp->swa_pattern = 4; /* olmo3's layout, when the file has a window */
	if (hp->arch == ENG_LLM_ARCH_GEMMA2) { /* models/gemma2.cpp load_arch_hparams */
		hp->swa_pattern = 2;
		hp->attn_softcap = 50.0f;
		hp->final_softcap = 30.0f;
		if (hp->n_layer == 46) /* gemma 2 27B: query_pre_attn_scalar = n_embd / n_head */
			hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));
	}
}

/* gemma2's soft caps and granite's scales ({arch}.attn_logit_softcapping,
 * final_logit_softcapping; logit_scale, residual_scale, embedding_scale,
 * attention.scale; a scale of 0 means none, as in llama.cpp). */
static void el_scale_keys(struct el_ld *ld)
{
	struct eng_llm_hp *hp = &ld->m->hp;
	if (ld->rc)
		return;
	if (hp->arch == ENG_LLM_ARCH_GEMMA2) {
		hp->attn_softcap = el_f32(ld, "attn_logit_softcapping", hp->attn_softcap);
		hp->final_softcap = el_f32(ld, "final_logit_softcapping", hp->final_softcap);
	}
	if (hp->arch != ENG_LLM_ARCH_GRANITE)
		return;
	float v = el_f32(ld, "logit_scale", 1.0f);
	hp->logit_scale = v != 0.0f ? v : 1.0f;
	v = el_f32(ld, "residual_scale", 0.0f);
	hp->residual_scale = v != 0.0f ? v : 1.0f;
	v = el_f32(ld, "embedding_scale", 0.0f);
	hp->embd_scale = v != 0.0f ? v : 1.0f;
	v = el_f32(ld, "attention.scale", 0.0f);
	if (v != 0.0f)
		hp->attn_scale = v;
}

/* Keys that override the architecture's defaults: {arch}.rope.freq_base_swa
 * and {arch}.attention.sliding_window_pattern (a UINT32 n: layer il is
 * local when il % n < n - 1; the per-layer bool array form is refused). */
static void el_swa_keys(struct el_ld *ld)
{
	struct eng_llm_hp *hp = &ld->m->hp;
	char key[128];
	struct eng_gguf_val v;
	if (ld->rc)
		return;
	hp->rope_base_swa = el_f32(ld, "rope.freq_base_swa", hp->rope_base_swa);
	snprintf(key, sizeof(key), "%s.attention.sliding_window_pattern", ld->arch);
	if (eng_gguf_get_arr(ld->g, key, &v) == 0)
		el_fail(ld, -ST_UNSUPPORTED, "%s: per-layer arrays are not supported", key);
	el_u32(ld, "attention.sliding_window_pattern", hp->swa_pattern, &hp->swa_pattern);
}

/* The attention heads' keys, whose defaults derive from the head count
 * (so they run only once it was read), and their consistency. */
static void el_heads(struct el_ld *ld)
{
	struct eng_llm_hp *hp = &ld->m->hp;
	if (ld->rc)
		return;
	el_u32(ld, "attention.head_count_kv", hp->n_head, &hp->n_head_kv);
	el_u32(ld, "attention.key_length", 0, &hp->head_dim_k);
	if (!ld->rc && hp->head_dim_k == 0) { /* absent: the width split over the heads */
		if (hp->n_embd % hp->n_head)
			el_fail(ld, -ST_CORRUPT,
				"%s.attention.head_count %d does not divide %s.embedding_length %d "
				"(and no %s.attention.key_length gives the head size)",
				ld->arch, hp->n_head, ld->arch, hp->n_embd, ld->arch);
		hp->head_dim_k = hp->n_embd / hp->n_head;
	}
	el_u32(ld, "attention.value_length", hp->head_dim_k, &hp->head_dim_v);
	el_u32(ld, "rope.dimension_count", hp->head_dim_k, &hp->n_rot);
	/* gemma2's window is 4096 when the file does not say; llama.cpp
	 * ignores phi3's (models/phi3.cpp: "Phi SWA is currently disabled") */
	el_u32(ld, "attention.sliding_window", hp->arch == ENG_LLM_ARCH_GEMMA2 ? 4096 : 0,
	       &hp->n_swa);
	if (hp->arch == ENG_LLM_ARCH_PHI3)
		hp->n_swa = 0;
	if (!ld->rc && (hp->n_head % hp->n_head_kv || hp->n_rot > hp->head_dim_k ||
			hp->n_rot % 2 || hp->head_dim_k != hp->head_dim_v))
		el_fail(ld, -ST_UNSUPPORTED, "%s: unsupported head layout", ld->arch);
}

/* Norm epsilon and RoPE keys (all optional), then the architecture's
 * fixed settings, which the sliding-window keys may override. */
static void el_norm_rope(struct el_ld *ld)
{
	struct eng_llm_hp *hp = &ld->m->hp;
	if (ld->rc)
		return;
	hp->rms_eps = el_f32(ld, "attention.layer_norm_rms_epsilon", 1e-5f);
	hp->rope_base = el_f32(ld, "rope.freq_base", 10000.0f);
	float factor = el_f32(ld, "rope.scaling.factor", 1.0f);
	hp->rope_freq_scale = factor > 0 ? 1.0f / factor : 1.0f;
	el_arch_defaults(hp);
}

static void el_hparams(struct el_ld *ld)
{
	struct eng_llm_hp *hp = &ld->m->hp;
	el_arch(ld);
	el_u32(ld, "embedding_length", -1, &hp->n_embd);
	el_u32(ld, "block_count", -1, &hp->n_layer);
	el_u32(ld, "feed_forward_length", -1, &hp->n_ff);
	el_u32(ld, "attention.head_count", -1, &hp->n_head);
	el_u32(ld, "context_length", 2048, &hp->n_ctx_train);
	el_heads(ld);
	el_norm_rope(ld);
	el_swa_keys(ld);
	el_scale_keys(ld);
}

/* A weight matrix "name" of n_rows x n_cols (GGUF dims [n_cols, n_rows]);
 * optional ones may be absent. */
static void el_mat(struct el_ld *ld, const char *name, int n_rows, int n_cols, bool optional,
		   struct el_mat *out)
{
	if (ld->rc)
		return;
	const struct eng_gguf_tensor *t = eng_gguf_tensor_find(ld->g, name);
	memset(out, 0, sizeof(*out));
	if (!t) {
		if (!optional)
			el_fail(ld, -ST_CORRUPT, "tensor '%s' is missing", name);
		return;
	}
	if (t->n_dims < 1 || t->n_dims > 2 || (int)t->dims[0] != n_cols ||
	    (int)(t->n_dims == 2 ? t->dims[1] : 1) != n_rows) {
		el_fail(ld, -ST_CORRUPT,
			"tensor '%s' is %llu x %llu (rows x columns), but the metadata (%s.*: "
			"widths, head counts and sizes) makes it %d x %d",
			name, (unsigned long long)(t->n_dims == 2 ? t->dims[1] : 1),
			(unsigned long long)t->dims[0], ld->arch, n_rows, n_cols);
		return;
	}
	out->type = (int)t->type;
	out->row_bytes = dev_mat_row_bytes((int)t->type, (size_t)n_cols);
	if (!out->row_bytes) {
		el_fail(ld, -ST_UNSUPPORTED, "tensor '%s': its type is not supported yet", name);
		return;
	}
	out->data = t->data;
	out->n_rows = n_rows;
	out->n_cols = n_cols;
	if (out->row_bytes * (size_t)n_rows != t->size_bytes)
		el_fail(ld, -ST_CORRUPT, "tensor '%s': size disagrees with its type", name);
}

/* An F32 vector of n elements (norm weights, biases). */
static void el_vec(struct el_ld *ld, const char *name, int n, bool optional, const float **out)
{
	if (ld->rc)
		return;
	const struct eng_gguf_tensor *t = eng_gguf_tensor_find(ld->g, name);
	*out = NULL;
	if (!t) {
		if (!optional)
			el_fail(ld, -ST_CORRUPT, "tensor '%s' is missing", name);
		return;
	}
	if (t->type != 0 || t->n_dims != 1 || (int)t->dims[0] != n) {
		el_fail(ld, -ST_CORRUPT, "tensor '%s' should be an F32 vector of the model's width",
			name);
		return;
	}
	*out = t->data;
}

/* Rows [r0, r0 + n) of m as a matrix of its own: a view into a fused
 * tensor (attn_qkv, phi3's ffn_up). */
static struct el_mat el_rows(const struct el_mat *m, int r0, int n)
{
	struct el_mat v = *m;
	v.data = (const char *)m->data + (size_t)r0 * m->row_bytes;
	v.n_rows = n;
	return v;
}

/* Tensor names of layer i: EL_NAME("attn_q.weight") -> "blk.i.attn_q.weight"
 * in the caller's buffer n. */
#define EL_NAME(s) (snprintf(n, sizeof(n), "blk.%d." s, i), n)

/* q, k, v from one fused attn_qkv tensor (rows q, then k, then v) when
 * the file has one, as llama.cpp's create_tensor_qkv reads it, else from
 * attn_q / attn_k / attn_v; the biases from a fused attn_qkv.bias, else
 * from the separate ones (which may come with fused weights). */
static void el_qkv(struct el_ld *ld, int i, int d, int qd, int kvd, struct el_layer *l)
{
	char n[96];
	if (!ld->rc && eng_gguf_tensor_find(ld->g, EL_NAME("attn_qkv.weight"))) {
		struct el_mat qkv;
		const float *b = NULL;
		el_mat(ld, n, qd + 2 * kvd, d, false, &qkv);
		el_vec(ld, EL_NAME("attn_qkv.bias"), qd + 2 * kvd, true, &b);
		if (ld->rc)
			return;
		l->wq = el_rows(&qkv, 0, qd);
		l->wk = el_rows(&qkv, qd, kvd);
		l->wv = el_rows(&qkv, qd + kvd, kvd);
		if (b) {
			l->bq = b;
			l->bk = b + qd;
			l->bv = b + qd + kvd;
			return;
		}
	} else {
		el_mat(ld, EL_NAME("attn_q.weight"), qd, d, false, &l->wq);
		el_mat(ld, EL_NAME("attn_k.weight"), kvd, d, false, &l->wk);
		el_mat(ld, EL_NAME("attn_v.weight"), kvd, d, false, &l->wv);
	}
	el_vec(ld, EL_NAME("attn_q.bias"), qd, true, &l->bq);
	el_vec(ld, EL_NAME("attn_k.bias"), kvd, true, &l->bk);
	el_vec(ld, EL_NAME("attn_v.bias"), kvd, true, &l->bv);
}

static void el_layer_attn(struct el_ld *ld, int i, struct el_layer *l)
{
	const struct eng_llm_hp *hp = &ld->m->hp;
	int d = hp->n_embd, qd = hp->n_head * hp->head_dim_k, kvd = hp->n_head_kv * hp->head_dim_k;
	bool qk_norm = hp->arch == ENG_LLM_ARCH_GEMMA3 || hp->arch == ENG_LLM_ARCH_QWEN3 ||
		       hp->qk_norm_full;
	bool olmo2 = hp->arch == ENG_LLM_ARCH_OLMO2; /* no pre-norm */
	char n[96];
	el_vec(ld, EL_NAME("attn_norm.weight"), d, olmo2, &l->attn_norm);
	el_qkv(ld, i, d, qd, kvd, l);
	el_mat(ld, EL_NAME("attn_output.weight"), d, qd, false, &l->wo);
	el_vec(ld, EL_NAME("attn_q_norm.weight"), hp->qk_norm_full ? qd : hp->head_dim_k, !qk_norm,
	       &l->q_norm);
	el_vec(ld, EL_NAME("attn_k_norm.weight"), hp->qk_norm_full ? kvd : hp->head_dim_k, !qk_norm,
	       &l->k_norm);
}

/* The FFN's gate and up matrices: ffn_gate and ffn_up, or, in a file
 * without ffn_gate (phi3), one ffn_up of 2 n_ff rows, gate first (ggml's
 * swiglu on the fused product). */
static void el_gate_up(struct el_ld *ld, int i, struct el_layer *l)
{
	const struct eng_llm_hp *hp = &ld->m->hp;
	char n[96];
	if (!ld->rc && !eng_gguf_tensor_find(ld->g, EL_NAME("ffn_gate.weight"))) {
		struct el_mat gu;
		el_mat(ld, EL_NAME("ffn_up.weight"), 2 * hp->n_ff, hp->n_embd, false, &gu);
		if (ld->rc)
			return;
		l->w_gate = el_rows(&gu, 0, hp->n_ff);
		l->w_up = el_rows(&gu, hp->n_ff, hp->n_ff);
		return;
	}
	el_mat(ld, EL_NAME("ffn_gate.weight"), hp->n_ff, hp->n_embd, false, &l->w_gate);
	el_mat(ld, EL_NAME("ffn_up.weight"), hp->n_ff, hp->n_embd, false, &l->w_up);
}

static void el_layer_ffn(struct el_ld *ld, int i, struct el_layer *l)
{
	const struct eng_llm_hp *hp = &ld->m->hp;
	int d = hp->n_embd;
	bool post = el_gemma(hp->arch) || hp->arch == ENG_LLM_ARCH_OLMO2;
	char n[96];
	el_vec(ld, EL_NAME("ffn_norm.weight"), d, hp->arch == ENG_LLM_ARCH_OLMO2, &l->ffn_norm);
	el_gate_up(ld, i, l);
	el_mat(ld, EL_NAME("ffn_down.weight"), d, hp->n_ff, false, &l->w_down);
	el_vec(ld, EL_NAME("post_attention_norm.weight"), d, !post, &l->post_attn_norm);
	el_vec(ld, EL_NAME("post_ffw_norm.weight"), d, !post, &l->post_ffw_norm);
#undef EL_NAME
	l->swa = hp->n_swa > 0 && hp->swa_pattern > 1 && i % hp->swa_pattern < hp->swa_pattern - 1;
}

/* The embedding, output and final norm; the output is tied to the
 * embedding when the file has none. */
static void el_io_weights(struct el_ld *ld)
{
	struct eng_llm *m = ld->m;
	struct eng_llm_hp *hp = &m->hp;
	if (ld->rc)
		return;
	const struct eng_gguf_tensor *te = eng_gguf_tensor_find(ld->g, "token_embd.weight");
	if (!te || te->n_dims != 2) {
		el_fail(ld, -ST_CORRUPT, "tensor '%s' is missing", "token_embd.weight");
		return;
	}
	hp->n_vocab = (int)te->dims[1];
	el_mat(ld, "token_embd.weight", hp->n_vocab, hp->n_embd, false, &m->tok_embd);
	el_mat(ld, "output.weight", hp->n_vocab, hp->n_embd, true, &m->output);
	el_vec(ld, "output.bias", hp->n_vocab, true, &m->output_b);
	el_vec(ld, "output_norm.weight", hp->n_embd, false, &m->output_norm);
	/* llama 3's RoPE frequency factors; Phi-3 128k's long / short ones come
	 * with LongRoPE's attention factor, which is not implemented */
	el_vec(ld, "rope_freqs.weight", hp->n_rot / 2, true, &m->rope_freqs);
	if (!ld->rc && (eng_gguf_tensor_find(ld->g, "rope_factors_long.weight") ||
			eng_gguf_tensor_find(ld->g, "rope_factors_short.weight")))
		el_fail(ld, -ST_UNSUPPORTED, "%s",
			"LongRoPE frequency factors (rope_factors_long / short) are not supported");
	hp->tied_output = m->output.data == NULL;
	if (hp->tied_output)
		m->output = m->tok_embd;
}

static void el_weights(struct el_ld *ld)
{
	struct eng_llm *m = ld->m;
	el_io_weights(ld);
	if (ld->rc)
		return;
	m->layers = mem_calloc((size_t)m->hp.n_layer, sizeof(*m->layers));
	if (!m->layers) {
		el_fail(ld, -ST_NOMEM, "%s", "out of memory");
		return;
	}
	for (int i = 0; !ld->rc && i < m->hp.n_layer; i++) {
		el_layer_attn(ld, i, &m->layers[i]);
		el_layer_ffn(ld, i, &m->layers[i]);
	}
}

int eng_llm_load(const struct eng_gguf *g, struct eng_llm **out, char *err, size_t errlen)
{
	*out = NULL;
	struct eng_llm *m = mem_calloc(1, sizeof(*m));
	if (!m)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	struct el_ld ld = { .g = g, .m = m, .err = err, .errlen = errlen };
	int rc = eng_llm_binds_init(m, err, errlen);
	if (rc) {
		eng_llm_destroy(m);
		return rc;
	}
	el_hparams(&ld);
	el_weights(&ld);
	if (ld.rc) {
		eng_llm_destroy(m);
		return ld.rc;
	}
	*out = m;
	return 0;
}

void eng_llm_destroy(struct eng_llm *m)
{
	if (!m)
		return;
	eng_llm_w_free_all(m);
	mem_free(m->layers);
	mem_free(m);
}

const struct eng_llm_hp *eng_llm_hp(const struct eng_llm *m)
{
	return &m->hp;
}
