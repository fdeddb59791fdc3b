/* eng_llm_load.c - hyper-parameters and weight views of a GGUF language
 * model. Keys and tensor names follow the GGUF specification and
 * llama.cpp's llama-arch.cpp / llama-model.cpp (per-architecture defaults
 * noted where the file is silent). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/format/eng_gguf.h"
#include "engine/models/eng_llm_int.h"
#include "kernels/kn.h"
#include "kernels/kn_half.h"
#include "kernels/kn_quant.h"

static const char *const el_arch_names[ENG_LLM_ARCH_COUNT] = {
	[ENG_LLM_ARCH_LLAMA] = "llama",
	[ENG_LLM_ARCH_QWEN2] = "qwen2",
	[ENG_LLM_ARCH_QWEN3] = "qwen3",
	[ENG_LLM_ARCH_GEMMA3] = "gemma3",
};

const char *eng_llm_arch_name(enum eng_llm_arch a)
{
	return a >= 0 && a < ENG_LLM_ARCH_COUNT ? el_arch_names[a] : "unknown";
}

struct el_ld {
	const struct eng_gguf *g;
	struct eng_llm *m;
	const char *arch;
	char *err;
	size_t errlen;
};

static int el_fail(struct el_ld *ld, int rc, const char *fmt, const char *what)
{
	snprintf(ld->err, ld->errlen, fmt, what);
	return rc;
}

/* "{arch}.suffix" as an integer (any integer type) or *out = def when
 * absent (def < 0: required). */
static int el_u32(struct el_ld *ld, const char *suffix, int def, int *out)
{
	char key[128];
	uint32_t v;
	snprintf(key, sizeof(key), "%s.%s", ld->arch, suffix);
	int rc = eng_gguf_get_u32(ld->g, key, &v);
	if (rc == -ST_NOTFOUND && def >= 0) {
		*out = def;
		return 0;
	}
	if (rc || v == 0 || v > (1u << 30))
		return el_fail(ld, -ST_CORRUPT, "%s: missing or out of range", key);
	*out = (int)v;
	return 0;
}

static float el_f32(struct el_ld *ld, const char *suffix, float def)
{
	char key[128];
	float v;
	snprintf(key, sizeof(key), "%s.%s", ld->arch, suffix);
	return eng_gguf_get_f32(ld->g, key, &v) == 0 && isfinite(v) ? v : def;
}

static int el_arch(struct el_ld *ld)
{
	const char *a;
	if (eng_gguf_get_str(ld->g, "general.architecture", &a, NULL))
		return el_fail(ld, -ST_CORRUPT, "%s: missing", "general.architecture");
	for (int i = 0; i < ENG_LLM_ARCH_COUNT; i++)
		if (!strcmp(a, el_arch_names[i])) {
			ld->m->hp.arch = (enum eng_llm_arch)i;
			ld->arch = el_arch_names[i];
			return 0;
		}
	return el_fail(ld, -ST_UNSUPPORTED,
		       "architecture '%s' is not supported (gemma3, llama, qwen2, qwen3 are)", a);
}

/* Per-architecture settings llama.cpp fixes in code rather than keys. */
static void el_arch_defaults(struct eng_llm_hp *hp)
{
	hp->rope_neox = hp->arch != ENG_LLM_ARCH_LLAMA;
	hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim_k);
	hp->embd_scale = 1.0f;
	hp->rope_base_swa = hp->rope_base;
	hp->swa_pattern = 1;
	if (hp->arch == ENG_LLM_ARCH_GEMMA3) {
		hp->embd_scale = sqrtf((float)hp->n_embd);
		hp->rope_base_swa = 10000.0f; /* llama-model.cpp: rope_freq_base_train_swa */
		hp->swa_pattern = 6;          /* set_swa_pattern(6): every 6th layer global */
	}
}

/* Keys that override the architecture's defaults: {arch}.rope.freq_base_swa
 * and {arch}.attention.sliding_window_pattern (a UINT32 n: layer il is
 * local when il % n < n - 1; the per-layer bool array form is refused). */
static int el_swa_keys(struct el_ld *ld)
{
	struct eng_llm_hp *hp = &ld->m->hp;
	char key[128];
	struct eng_gguf_val v;
	hp->rope_base_swa = el_f32(ld, "rope.freq_base_swa", hp->rope_base_swa);
	snprintf(key, sizeof(key), "%s.attention.sliding_window_pattern", ld->arch);
	if (eng_gguf_get_arr(ld->g, key, &v) == 0)
		return el_fail(ld, -ST_UNSUPPORTED, "%s: per-layer arrays are not supported", key);
	return el_u32(ld, "attention.sliding_window_pattern", hp->swa_pattern, &hp->swa_pattern);
}

static int el_hparams(struct el_ld *ld)
{
	struct eng_llm_hp *hp = &ld->m->hp;
	int rc = el_arch(ld);
	if (!rc)
		rc = el_u32(ld, "embedding_length", -1, &hp->n_embd);
	if (!rc)
		rc = el_u32(ld, "block_count", -1, &hp->n_layer);
	if (!rc)
		rc = el_u32(ld, "feed_forward_length", -1, &hp->n_ff);
	if (!rc)
		rc = el_u32(ld, "attention.head_count", -1, &hp->n_head);
	if (!rc)
		rc = el_u32(ld, "context_length", 2048, &hp->n_ctx_train);
	if (!rc)
		rc = el_u32(ld, "attention.head_count_kv", hp->n_head, &hp->n_head_kv);
	if (!rc)
		rc = el_u32(ld, "attention.key_length", hp->n_embd / hp->n_head, &hp->head_dim_k);
	if (!rc)
		rc = el_u32(ld, "attention.value_length", hp->head_dim_k, &hp->head_dim_v);
	if (!rc)
		rc = el_u32(ld, "rope.dimension_count", hp->head_dim_k, &hp->n_rot);
	if (!rc)
		rc = el_u32(ld, "attention.sliding_window", 0, &hp->n_swa);
	if (rc)
		return rc;
	if (hp->n_head % hp->n_head_kv || hp->n_rot > hp->head_dim_k || hp->n_rot % 2 ||
	    hp->head_dim_k != hp->head_dim_v)
		return el_fail(ld, -ST_UNSUPPORTED, "%s: unsupported head layout", ld->arch);
	hp->rms_eps = el_f32(ld, "attention.layer_norm_rms_epsilon", 1e-5f);
	hp->rope_base = el_f32(ld, "rope.freq_base", 10000.0f);
	float factor = el_f32(ld, "rope.scaling.factor", 1.0f);
	hp->rope_freq_scale = factor > 0 ? 1.0f / factor : 1.0f;
	el_arch_defaults(hp);
	return el_swa_keys(ld);
}

/* A weight matrix "name" of n_rows x n_cols (GGUF dims [n_cols, n_rows]);
 * optional ones may be absent. */
static int el_mat(struct el_ld *ld, const char *name, int n_rows, int n_cols, bool optional,
		  struct el_mat *out)
{
	const struct eng_gguf_tensor *t = eng_gguf_tensor_find(ld->g, name);
	memset(out, 0, sizeof(*out));
	if (!t)
		return optional ? 0 : el_fail(ld, -ST_CORRUPT, "tensor '%s' is missing", name);
	if (t->n_dims < 1 || t->n_dims > 2 || (int)t->dims[0] != n_cols ||
	    (int)(t->n_dims == 2 ? t->dims[1] : 1) != n_rows)
		return el_fail(ld, -ST_CORRUPT, "tensor '%s' has a shape the metadata contradicts",
			       name);
	out->q = kn_qops_get((int)t->type);
	if (!out->q)
		return el_fail(ld, -ST_UNSUPPORTED, "tensor '%s': its type is not supported yet",
			       name);
	out->data = t->data;
	out->row_bytes = kn_qtype_row_bytes((int)t->type, (size_t)n_cols);
	out->n_rows = n_rows;
	out->n_cols = n_cols;
	return out->row_bytes * (size_t)n_rows == t->size_bytes
		       ? 0
		       : el_fail(ld, -ST_CORRUPT, "tensor '%s': size disagrees with its type", name);
}

/* An F32 vector of n elements (norm weights, biases). */
static int el_vec(struct el_ld *ld, const char *name, int n, bool optional, const float **out)
{
	const struct eng_gguf_tensor *t = eng_gguf_tensor_find(ld->g, name);
	*out = NULL;
	if (!t)
		return optional ? 0 : el_fail(ld, -ST_CORRUPT, "tensor '%s' is missing", name);
	if (t->type != 0 || t->n_dims != 1 || (int)t->dims[0] != n)
		return el_fail(ld, -ST_CORRUPT, "tensor '%s' should be an F32 vector of the model's width",
			       name);
	*out = t->data;
	return 0;
}

static int el_layer_attn(struct el_ld *ld, int i, struct el_layer *l)
{
	const struct eng_llm_hp *hp = &ld->m->hp;
	int d = hp->n_embd, qd = hp->n_head * hp->head_dim_k, kvd = hp->n_head_kv * hp->head_dim_k;
	bool qk_norm = hp->arch == ENG_LLM_ARCH_GEMMA3 || hp->arch == ENG_LLM_ARCH_QWEN3;
	char n[96];
#define EL_NAME(s) (snprintf(n, sizeof(n), "blk.%d." s, i), n)
	int rc = el_vec(ld, EL_NAME("attn_norm.weight"), d, false, &l->attn_norm);
	if (!rc)
		rc = el_mat(ld, EL_NAME("attn_q.weight"), qd, d, false, &l->wq);
	if (!rc)
		rc = el_mat(ld, EL_NAME("attn_k.weight"), kvd, d, false, &l->wk);
	if (!rc)
		rc = el_mat(ld, EL_NAME("attn_v.weight"), kvd, d, false, &l->wv);
	if (!rc)
		rc = el_mat(ld, EL_NAME("attn_output.weight"), d, qd, false, &l->wo);
	if (!rc)
		rc = el_vec(ld, EL_NAME("attn_q.bias"), qd, true, &l->bq);
	if (!rc)
		rc = el_vec(ld, EL_NAME("attn_k.bias"), kvd, true, &l->bk);
	if (!rc)
		rc = el_vec(ld, EL_NAME("attn_v.bias"), kvd, true, &l->bv);
	if (!rc)
		rc = el_vec(ld, EL_NAME("attn_q_norm.weight"), hp->head_dim_k, !qk_norm, &l->q_norm);
	if (!rc)
		rc = el_vec(ld, EL_NAME("attn_k_norm.weight"), hp->head_dim_k, !qk_norm, &l->k_norm);
	return rc;
}

static int el_layer_ffn(struct el_ld *ld, int i, struct el_layer *l)
{
	const struct eng_llm_hp *hp = &ld->m->hp;
	int d = hp->n_embd;
	bool post = hp->arch == ENG_LLM_ARCH_GEMMA3;
	char n[96];
	int rc = el_vec(ld, EL_NAME("ffn_norm.weight"), d, false, &l->ffn_norm);
	if (!rc)
		rc = el_mat(ld, EL_NAME("ffn_gate.weight"), hp->n_ff, d, false, &l->w_gate);
	if (!rc)
		rc = el_mat(ld, EL_NAME("ffn_up.weight"), hp->n_ff, d, false, &l->w_up);
	if (!rc)
		rc = el_mat(ld, EL_NAME("ffn_down.weight"), d, hp->n_ff, false, &l->w_down);
	if (!rc)
		rc = el_vec(ld, EL_NAME("post_attention_norm.weight"), d, !post, &l->post_attn_norm);
	if (!rc)
		rc = el_vec(ld, EL_NAME("post_ffw_norm.weight"), d, !post, &l->post_ffw_norm);
#undef EL_NAME
	l->swa = hp->n_swa > 0 && hp->swa_pattern > 1 && i % hp->swa_pattern < hp->swa_pattern - 1;
	return rc;
}

static int el_weights(struct el_ld *ld)
{
	struct eng_llm *m = ld->m;
	struct eng_llm_hp *hp = &m->hp;
	const struct eng_gguf_tensor *te = eng_gguf_tensor_find(ld->g, "token_embd.weight");
	if (!te || te->n_dims != 2)
		return el_fail(ld, -ST_CORRUPT, "tensor '%s' is missing", "token_embd.weight");
	hp->n_vocab = (int)te->dims[1];
	int rc = el_mat(ld, "token_embd.weight", hp->n_vocab, hp->n_embd, false, &m->tok_embd);
	if (!rc)
		rc = el_mat(ld, "output.weight", hp->n_vocab, hp->n_embd, true, &m->output);
	if (!rc)
		rc = el_vec(ld, "output_norm.weight", hp->n_embd, false, &m->output_norm);
	if (rc)
		return rc;
	hp->tied_output = m->output.data == NULL;
	if (hp->tied_output)
		m->output = m->tok_embd;
	m->layers = mem_calloc((size_t)hp->n_layer, sizeof(*m->layers));
	if (!m->layers)
		return el_fail(ld, -ST_NOMEM, "%s", "out of memory");
	for (int i = 0; !rc && i < hp->n_layer; i++) {
		rc = el_layer_attn(ld, i, &m->layers[i]);
		if (!rc)
			rc = el_layer_ffn(ld, i, &m->layers[i]);
	}
	return rc;
}

/* ggml's CPU GELU: the tanh approximation evaluated once per binary16
 * input and rounded to binary16 (ggml_table_gelu_f16), which llama.cpp's
 * GeGLU reads; matching it keeps gemma3's logits with llama.cpp's. */
static int el_gelu_table(struct eng_llm *m)
{
	m->gelu_f16 = mem_alloc(65536 * sizeof(float));
	if (!m->gelu_f16)
		return -ST_NOMEM;
	const struct kn_ops *ops = kn_ops();
	for (uint32_t i = 0; i < 65536; i++) {
		uint16_t h = (uint16_t)i;
		float x, y;
		ops->f16_to_f32(&h, &x, 1);
		y = 0.5f * x * (1.0f + tanhf(0.79788456080286535588f * x * (1.0f + 0.044715f * x * x)));
		h = kn_f32_to_f16(y);
		ops->f16_to_f32(&h, &m->gelu_f16[i], 1);
	}
	return 0;
}

int eng_llm_load(const struct eng_gguf *g, struct eng_llm **out, char *err, size_t errlen)
{
	*out = NULL;
	kn_init(KN_ISA_COUNT);
	struct eng_llm *m = mem_calloc(1, sizeof(*m));
	if (!m) {
		snprintf(err, errlen, "out of memory");
		return -ST_NOMEM;
	}
	struct el_ld ld = { .g = g, .m = m, .err = err, .errlen = errlen };
	int rc = el_hparams(&ld);
	if (!rc)
		rc = el_weights(&ld);
	if (!rc && m->hp.arch == ENG_LLM_ARCH_GEMMA3 && el_gelu_table(m))
		rc = el_fail(&ld, -ST_NOMEM, "%s", "out of memory");
	if (rc) {
		eng_llm_destroy(m);
		return rc;
	}
	*out = m;
	return 0;
}

void eng_llm_destroy(struct eng_llm *m)
{
	if (!m)
		return;
	mem_free(m->layers);
	mem_free(m->gelu_f16);
	mem_free(m);
}

const struct eng_llm_hp *eng_llm_hp(const struct eng_llm *m)
{
	return &m->hp;
}
