/* eng_whisper_load.c - Whisper weights from a CTranslate2 WhisperSpec,
 * converted to float32 once at load, or with compute type int8 the
 * linears quantized to int8 per output row (dev.h's DEV_TYPE_I8R rows);
 * each device's matrices are made from these host arrays
 * (eng_whisper_dev.c).
 *
 * Variable names follow CTranslate2's WhisperSpec (python/ctranslate2/
 * specs/whisper_spec.py): encoder/conv1, encoder/conv2,
 * encoder/position_encodings/encodings, encoder/layer_N/{self_attention,
 * ffn}/..., decoder/embeddings/weight, decoder/layer_N/{self_attention,
 * attention, ffn}/..., {encoder,decoder}/layer_norm. Attention linear_0 is
 * the fused q|k|v (or q for cross-attention), linear_1 the output (or the
 * fused k|v of the memory for cross-attention), linear_2 the output of
 * cross-attention.
 *
 * Loading is straight-line: the steps share one reader (struct ew_ld)
 * whose first error sticks; every later step is then a no-op, and
 * eng_whisper_load checks the reader once at the end.
 */
#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/format/eng_ct2.h"
#include "devices/dev.h"
#include "engine/models/eng_whisper_int.h"

/* Load-time context: the reader, the model, and the first error. */
struct ew_ld {
	const struct eng_ct2 *ct2;
	struct eng_whisper *w;
	bool int8_enc, int8_dec; /* int8 linears (I8R rows, no float copies) there */
	bool bf16;   /* encoder products and cross-attention K/V in bfloat16 */
	int rc;      /* 0, or the first failure: later steps do nothing */
	char *err;   /* the first failure's "NAME: what" */
	size_t errlen;
};

/* ew_fail - record rc and "NAME: what" unless an earlier failure stuck. */
static void ew_fail(struct ew_ld *ld, int rc, const char *name, const char *what)
{
	if (!ld->rc)
		ld->rc = st_errf(rc, ld->err, ld->errlen, "%s: %s", name, what);
}

static void *ew_track(struct eng_whisper *w, size_t bytes)
{
	if (w->n_allocs == w->cap_allocs) {
		size_t cap = w->cap_allocs ? 2 * w->cap_allocs : 64;
		void **a = mem_realloc(w->allocs, cap * sizeof(*a));
		if (!a)
			return NULL;
		w->allocs = a;
		w->cap_allocs = cap;
	}
	void *p = mem_alloc(bytes);
	if (p) {
		w->allocs[w->n_allocs++] = p;
		w->weight_bytes += bytes;
	}
	return p;
}

void eng_whisper_untrack(struct eng_whisper *w, void *p, size_t bytes)
{
	for (size_t i = w->n_allocs; i-- > 0;)
		if (w->allocs[i] == p) {
			w->allocs[i] = w->allocs[--w->n_allocs];
			w->weight_bytes -= bytes;
			mem_free(p);
			return;
		}
}

/* The variable's binary16 bits when it is stored as float16 (a lossless
 * copy for kn gemv_f16), else NULL. Only running out of memory fails. */
static void ew_half(struct ew_ld *ld, const char *name, uint16_t **out)
{
	if (ld->rc)
		return;
	const struct eng_ct2_var *v = eng_ct2_var_find(ld->ct2, name);
	*out = NULL;
	if (!v || v->dtype != ENG_CT2_DTYPE_FLOAT16)
		return;
	*out = ew_track(ld->w, v->size_bytes);
	if (!*out) {
		ew_fail(ld, -ST_NOMEM, name, "out of memory");
		return;
	}
	memcpy(*out, v->data, v->size_bytes); /* the map is unaligned */
}

/* The per-row scales of an int8 variable NAME: CTranslate2 stores
 * "NAME_scale" (python/ctranslate2/specs/model_spec.py: weight_scale =
 * 127 / amax of each row, 127 for an all-zero row; the codes are
 * rint(w * scale)), float32 or float16. scale[0..rows) = 1 / that (what
 * one code is worth), DEV_TYPE_I8R's convention. */
static void ew_i8_scales(struct ew_ld *ld, const char *name, size_t rows, float *scale)
{
	char sname[272];
	snprintf(sname, sizeof(sname), "%s_scale", name);
	const struct eng_ct2_var *s = eng_ct2_var_find(ld->ct2, sname);
	if (!s || s->n_elems != rows ||
	    (s->dtype != ENG_CT2_DTYPE_FLOAT32 && s->dtype != ENG_CT2_DTYPE_FLOAT16)) {
		ew_fail(ld, -ST_CORRUPT, sname, "missing, or not one float per row of the int8 weight");
		return;
	}
	for (size_t r = 0; r < rows; r++) {
		float f;
		if (s->dtype == ENG_CT2_DTYPE_FLOAT32) {
			memcpy(&f, (const char *)s->data + 4 * r, sizeof(f));
		} else {
			dev_f16_to_f32((const char *)s->data + 2 * r, 1, &f);
		}
		scale[r] = f > 0.0f ? 1.0f / f : 0.0f;
	}
}

/* p[r, k] = q[r, k] / weight_scale[r]: an int8-stored [rows, cols]
 * variable back in float32 (compute type float32). */
static void ew_dequant_i8(struct ew_ld *ld, const struct eng_ct2_var *v, const char *name,
			  float *p)
{
	size_t rows = v->dims[0], cols = v->dims[1];
	float *scale = mem_alloc(rows * sizeof(float));
	if (!scale) {
		ew_fail(ld, -ST_NOMEM, name, "out of memory");
		return;
	}
	ew_i8_scales(ld, name, rows, scale);
	const int8_t *q = v->data;
	for (size_t r = 0; !ld->rc && r < rows; r++)
		for (size_t k = 0; k < cols; k++)
			p[r * cols + k] = (float)q[r * cols + k] * scale[r];
	mem_free(scale);
}

/* Convert the variable to float32; want_dims[0..rank) must match (0 =
 * any, reported back in got_dims). */
static void ew_tensor(struct ew_ld *ld, const char *name, int rank, const int *want_dims,
		      int *got_dims, float **out)
{
	if (ld->rc)
		return;
	const struct eng_ct2_var *v = eng_ct2_var_find(ld->ct2, name);
	*out = NULL;
	if (!v) {
		ew_fail(ld, -ST_CORRUPT, name, "missing from the WhisperSpec");
		return;
	}
	if ((int)v->rank != rank) {
		ew_fail(ld, -ST_CORRUPT, name, "unexpected rank");
		return;
	}
	for (int i = 0; i < rank; i++) {
		if (want_dims && want_dims[i] && (int)v->dims[i] != want_dims[i]) {
			ew_fail(ld, -ST_CORRUPT, name, "shape disagrees with the model");
			return;
		}
		if (got_dims)
			got_dims[i] = (int)v->dims[i];
	}
	float *p = ew_track(ld->w, v->n_elems * sizeof(float));
	if (!p) {
		ew_fail(ld, -ST_NOMEM, name, "out of memory");
		return;
	}
	if (v->dtype == ENG_CT2_DTYPE_FLOAT16) {
		dev_f16_to_f32(v->data, v->n_elems, p); /* the data is unaligned */
	} else if (v->dtype == ENG_CT2_DTYPE_FLOAT32) {
		memcpy(p, v->data, v->size_bytes);
	} else if (v->dtype == ENG_CT2_DTYPE_BFLOAT16) {
		dev_bf16_to_f32(v->data, v->n_elems, p);
	} else if (v->dtype == ENG_CT2_DTYPE_INT8 && rank == 2) {
		ew_dequant_i8(ld, v, name, p);
		if (ld->rc)
			return;
	} else {
		ew_fail(ld, -ST_UNSUPPORTED, name,
			"int16 CTranslate2 weights are not supported; convert with "
			"--quantization int8, float16 or float32");
		return;
	}
	*out = p;
}

/* An integer scalar variable (int8/int16/int32). */
static void ew_scalar(struct ew_ld *ld, const char *name, long *out)
{
	if (ld->rc)
		return;
	const struct eng_ct2_var *v = eng_ct2_var_find(ld->ct2, name);
	if (!v || v->n_elems != 1) {
		ew_fail(ld, -ST_CORRUPT, name, "missing scalar");
		return;
	}
	const uint8_t *b = v->data;
	switch (v->dtype) {
	case ENG_CT2_DTYPE_INT8: *out = (int8_t)b[0]; return;
	case ENG_CT2_DTYPE_INT16: *out = (int16_t)(b[0] | (b[1] << 8)); return;
	case ENG_CT2_DTYPE_INT32: {
		int32_t x;
		memcpy(&x, b, sizeof(x));
		*out = x;
		return;
	}
	default:
		ew_fail(ld, -ST_CORRUPT, name, "not an integer scalar");
	}
}

/* Stored int8 NAME [N, K] (CTranslate2 int8*): its codes as they are
 * behind each row's scale, its weight_scale inverted (DEV_TYPE_I8R rows). */
static void ew_i8_stored(struct ew_ld *ld, const struct eng_ct2_var *v, const char *name,
			 size_t N, size_t K, char *rows)
{
	if (v->rank != 2 || v->dims[0] != N || v->dims[1] != K) {
		ew_fail(ld, -ST_CORRUPT, name, "shape disagrees with the model");
		return;
	}
	float *scale = mem_alloc(N * sizeof(float));
	if (!scale) {
		ew_fail(ld, -ST_NOMEM, name, "out of memory");
		return;
	}
	ew_i8_scales(ld, name, N, scale);
	for (size_t r = 0; !ld->rc && r < N; r++) {
		memcpy(rows + r * (4 + K), &scale[r], sizeof(float));
		memcpy(rows + r * (4 + K) + 4, (const int8_t *)v->data + r * K, K);
	}
	mem_free(scale);
}

/* *out = NAME [N, K] as DEV_TYPE_I8R rows: the stored codes when the
 * folder is int8, else wf (float32, borrowed) or the variable converted to
 * float32 (then freed) quantized per output row (dev_quantize_i8r). */
static void ew_linear_i8(struct ew_ld *ld, const char *name, int N, int K, const float *wf,
			 void **out)
{
	*out = NULL;
	if (ld->rc)
		return;
	char *rows = ew_track(ld->w, (size_t)N * dev_mat_row_bytes(DEV_TYPE_I8R, (size_t)K));
	if (!rows) {
		ew_fail(ld, -ST_NOMEM, name, "out of memory");
		return;
	}
	const struct eng_ct2_var *v = eng_ct2_var_find(ld->ct2, name);
	float *tmp = NULL;
	if (v && v->dtype == ENG_CT2_DTYPE_INT8)
		ew_i8_stored(ld, v, name, (size_t)N, (size_t)K, rows);
	else if (!wf)
		ew_tensor(ld, name, 2, (int[]){ N, K }, NULL, &tmp);
	if (!ld->rc && (!v || v->dtype != ENG_CT2_DTYPE_INT8) &&
	    dev_quantize_i8r(wf ? wf : tmp, (size_t)N, (size_t)K, rows))
		ew_fail(ld, -ST_NOMEM, name, "out of memory");
	if (tmp)
		eng_whisper_untrack(ld->w, tmp, (size_t)N * (size_t)K * sizeof(float));
	*out = rows;
}

/* l's float32 weights rounded to bfloat16, for the bfloat16 products. */
static void ew_pack_bf16(struct ew_ld *ld, const char *name, struct ew_linear *l)
{
	if (ld->rc)
		return;
	size_t n = (size_t)l->n_out * (size_t)l->n_in;
	l->wbf = ew_track(ld->w, n * sizeof(uint16_t));
	if (!l->wbf) {
		ew_fail(ld, -ST_NOMEM, name, "out of memory");
		return;
	}
	dev_round_bf16(l->w, n, l->wbf);
}

/* Linear PREFIX/weight [n_out, n_in] (+ PREFIX/bias): enc_rows when its
 * product runs over the encoder's rows (every encoder linear, and the
 * decoder's cross-attention keys/values), which the bfloat16 types compute
 * in bfloat16 (DEV_MAT_CT2 BF16 matrices). */
static void ew_linear_at(struct ew_ld *ld, const char *prefix, int n_out, int n_in, bool bias,
			 bool enc_rows, struct ew_linear *l)
{
	char name[256];
	int dims[2] = { n_out, n_in };
	snprintf(name, sizeof(name), "%s/weight", prefix);
	l->w = NULL;
	l->w16 = NULL;
	l->wbf = NULL;
	l->i8 = NULL;
	bool enc = !strncmp(prefix, "encoder/", 8);
	bool bf16 = ld->bf16 && enc_rows;
	bool int8 = !bf16 && (enc ? ld->int8_enc : ld->int8_dec);
	if (int8)
		ew_linear_i8(ld, name, n_out, n_in, NULL, &l->i8);
	else
		ew_tensor(ld, name, 2, dims, NULL, &l->w);
	l->n_out = n_out;
	l->n_in = n_in;
	l->b = NULL;
	if (bf16)
		ew_pack_bf16(ld, name, l);
	if (!int8 && !enc)
		ew_half(ld, name, &l->w16);
	if (!bias)
		return;
	snprintf(name, sizeof(name), "%s/bias", prefix);
	ew_tensor(ld, name, 1, dims, NULL, &l->b);
}

static void ew_linear(struct ew_ld *ld, const char *prefix, int n_out, int n_in, bool bias,
		      struct ew_linear *l)
{
	ew_linear_at(ld, prefix, n_out, n_in, bias, !strncmp(prefix, "encoder/", 8), l);
}

static void ew_norm(struct ew_ld *ld, const char *prefix, struct ew_norm *n)
{
	char name[256];
	int d[1] = { ld->w->hp.d_model };
	snprintf(name, sizeof(name), "%s/gamma", prefix);
	ew_tensor(ld, name, 1, d, NULL, &n->gamma);
	snprintf(name, sizeof(name), "%s/beta", prefix);
	ew_tensor(ld, name, 1, d, NULL, &n->beta);
}

/* Self-attention block "PREFIX/self_attention": norm, fused qkv, output. */
static void ew_self_attn(struct ew_ld *ld, const char *prefix, struct ew_norm *ln,
			 struct ew_linear *qkv, struct ew_linear *out)
{
	char p[200];
	int d = ld->w->hp.d_model;
	snprintf(p, sizeof(p), "%s/self_attention/layer_norm", prefix);
	ew_norm(ld, p, ln);
	snprintf(p, sizeof(p), "%s/self_attention/linear_0", prefix);
	ew_linear(ld, p, 3 * d, d, true, qkv);
	snprintf(p, sizeof(p), "%s/self_attention/linear_1", prefix);
	ew_linear(ld, p, d, d, true, out);
}

static void ew_ffn(struct ew_ld *ld, const char *prefix, struct ew_norm *ln,
		   struct ew_linear *f1, struct ew_linear *f2)
{
	char p[200];
	const struct eng_whisper_hp *hp = &ld->w->hp;
	snprintf(p, sizeof(p), "%s/ffn/layer_norm", prefix);
	ew_norm(ld, p, ln);
	snprintf(p, sizeof(p), "%s/ffn/linear_0", prefix);
	ew_linear(ld, p, hp->d_ffn, hp->d_model, true, f1);
	snprintf(p, sizeof(p), "%s/ffn/linear_1", prefix);
	ew_linear(ld, p, hp->d_model, hp->d_ffn, true, f2);
}

static void ew_dec_layer(struct ew_ld *ld, int i, struct ew_dec_layer *l)
{
	char p[64], q[200];
	int d = ld->w->hp.d_model;
	snprintf(p, sizeof(p), "decoder/layer_%d", i);
	ew_self_attn(ld, p, &l->ln_self, &l->self_qkv, &l->self_out);
	snprintf(q, sizeof(q), "%s/attention/layer_norm", p);
	ew_norm(ld, q, &l->ln_cross);
	snprintf(q, sizeof(q), "%s/attention/linear_0", p);
	ew_linear(ld, q, d, d, true, &l->cross_q);
	snprintf(q, sizeof(q), "%s/attention/linear_1", p);
	ew_linear_at(ld, q, 2 * d, d, true, true, &l->cross_kv); /* over the encoder output */
	snprintf(q, sizeof(q), "%s/attention/linear_2", p);
	ew_linear(ld, q, d, d, true, &l->cross_out);
	ew_ffn(ld, p, &l->ln_ffn, &l->ffn1, &l->ffn2);
}

/* Count "PREFIX/layer_N/..." layers present. */
static int ew_count_layers(const struct eng_ct2 *ct2, const char *prefix)
{
	char name[128];
	int n = 0;
	for (;; n++) {
		snprintf(name, sizeof(name), "%s/layer_%d/ffn/linear_0/weight", prefix, n);
		if (!eng_ct2_var_find(ct2, name))
			return n;
	}
}

/* Settings CTranslate2 records as scalars that this implementation fixes:
 * pre-norm blocks, GELU (ActivationType::GELU = 3), no embedding scaling. */
static void ew_check_settings(struct ew_ld *ld)
{
	long act = 0, pre = 0, scale = 0, heads = 0;
	ew_scalar(ld, "decoder/activation", &act);
	ew_scalar(ld, "decoder/pre_norm", &pre);
	ew_scalar(ld, "decoder/scale_embeddings", &scale);
	ew_scalar(ld, "encoder/num_heads", &heads);
	if (act != 3 || pre != 1 || scale != 0)
		ew_fail(ld, -ST_UNSUPPORTED, "decoder/activation",
			"expected GELU, pre-norm and unscaled embeddings (a Whisper model)");
	if (heads <= 0 || ld->w->hp.d_model % heads)
		ew_fail(ld, -ST_CORRUPT, "encoder/num_heads", "does not divide the width");
	ld->w->hp.n_heads = (int)heads;
}

/* Shapes: conv1 [d, n_mels, 3], embeddings [n_vocab, d], positions. */
static void ew_hparams(struct ew_ld *ld)
{
	struct eng_whisper_hp *hp = &ld->w->hp;
	const char *ffn0 = "encoder/layer_0/ffn/linear_0/weight";
	int c1[3] = { 0 }, emb[2] = { 0 }, ep[2] = { 0 }, dp[2] = { 0 };
	ew_tensor(ld, "encoder/conv1/weight", 3, (int[]){ 0, 0, 3 }, c1, &ld->w->conv1.w);
	ew_tensor(ld, "decoder/embeddings/weight", 2, (int[]){ 0, c1[0] }, emb, &ld->w->tok_emb);
	ew_tensor(ld, "encoder/position_encodings/encodings", 2, (int[]){ 0, c1[0] }, ep,
		  &ld->w->enc_pos);
	ew_tensor(ld, "decoder/position_encodings/encodings", 2, (int[]){ 0, c1[0] }, dp,
		  &ld->w->dec_pos);
	const struct eng_ct2_var *ffn = eng_ct2_var_find(ld->ct2, ffn0);
	if (!ffn)
		ew_fail(ld, -ST_CORRUPT, ffn0, "missing");
	*hp = (struct eng_whisper_hp){
		.n_mels = c1[1], .d_model = c1[0], .n_vocab = emb[0], .n_audio_ctx = ep[0],
		.n_text_ctx = dp[0], .d_ffn = ffn ? (int)ffn->dims[0] : 0,
		.enc_layers = ew_count_layers(ld->ct2, "encoder"),
		.dec_layers = ew_count_layers(ld->ct2, "decoder"),
	};
	if (hp->enc_layers == 0 || hp->dec_layers == 0 || hp->n_audio_ctx * 2 != ENG_WHISPER_N_FRAMES)
		ew_fail(ld, -ST_CORRUPT, "encoder", "unexpected layer count or audio context");
	ew_check_settings(ld);
}

/* The per-layer arrays, once the layer counts are known. */
static void ew_layers_alloc(struct ew_ld *ld)
{
	struct eng_whisper *w = ld->w;
	if (ld->rc)
		return;
	w->enc = mem_calloc((size_t)w->hp.enc_layers, sizeof(*w->enc));
	w->dec = w->enc ? mem_calloc((size_t)w->hp.dec_layers, sizeof(*w->dec)) : NULL;
	if (!w->dec)
		ew_fail(ld, -ST_NOMEM, "layers", "out of memory");
}

static void ew_load_all(struct ew_ld *ld)
{
	struct eng_whisper *w = ld->w;
	const struct eng_whisper_hp *hp = &w->hp;
	ew_hparams(ld);
	int d = hp->d_model;
	if (ld->int8_dec)
		ew_linear_i8(ld, "decoder/embeddings/weight", hp->n_vocab, d, w->tok_emb,
			     &w->tok_emb_i8);
	else
		ew_half(ld, "decoder/embeddings/weight", &w->tok_emb16);
	ew_tensor(ld, "encoder/conv1/bias", 1, (int[]){ d }, NULL, &w->conv1.b);
	ew_tensor(ld, "encoder/conv2/weight", 3, (int[]){ d, d, 3 }, NULL, &w->conv2.w);
	ew_tensor(ld, "encoder/conv2/bias", 1, (int[]){ d }, NULL, &w->conv2.b);
	ew_layers_alloc(ld);
	for (int i = 0; !ld->rc && i < hp->enc_layers; i++) {
		char p[64];
		snprintf(p, sizeof(p), "encoder/layer_%d", i);
		struct ew_enc_layer *l = &w->enc[i];
		ew_self_attn(ld, p, &l->ln_attn, &l->qkv, &l->out);
		ew_ffn(ld, p, &l->ln_ffn, &l->ffn1, &l->ffn2);
	}
	for (int i = 0; !ld->rc && i < hp->dec_layers; i++)
		ew_dec_layer(ld, i, &w->dec[i]);
	ew_norm(ld, "encoder/layer_norm", &w->enc_ln);
	ew_norm(ld, "decoder/layer_norm", &w->dec_ln);
}

/* Whether the folder stores its linears as int8 (CTranslate2 int8*). */
static bool ew_stored_int8(const struct eng_ct2 *ct2)
{
	const struct eng_ct2_var *v =
		eng_ct2_var_find(ct2, "encoder/layer_0/ffn/linear_0/weight");
	return v && v->dtype == ENG_CT2_DTYPE_INT8;
}

int eng_whisper_load(const struct eng_ct2 *ct2, struct eng_whisper **out, char *err,
		     size_t errlen)
{
	return eng_whisper_load_ct(ct2, ENG_COMPUTE_DEFAULT, out, err, errlen);
}

/* config.json "alignment_heads": [[layer, head], ...] (CTranslate2's
 * converter writes the list openai/whisper ships for each model); absent
 * is no heads, a pair out of the model's range is -ST_CORRUPT. */
static int ew_load_align_heads(struct eng_whisper *w, const struct eng_ct2 *ct2, char *err,
			       size_t errlen)
{
	const json_t *cfg = eng_ct2_config(ct2);
	const json_t *a = cfg ? json_object_get(cfg, "alignment_heads") : NULL;
	if (!a || json_is_null(a))
		return 0;
	size_t n = json_is_array(a) ? json_array_size(a) : 0;
	if (!json_is_array(a) || n > (size_t)w->hp.dec_layers * (size_t)w->hp.n_heads)
		return st_errf(-ST_CORRUPT, err, errlen,
			       "config.json alignment_heads: expected at most one [layer, head] pair "
			       "per decoder head");
	w->align_heads = n ? ew_track(w, n * sizeof(*w->align_heads)) : NULL;
	if (n && !w->align_heads)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const json_t *pr = json_array_get(a, i);
		json_int_t l = json_integer_value(json_array_get(pr, 0));
		json_int_t h = json_integer_value(json_array_get(pr, 1));
		if (json_array_size(pr) != 2 || !json_is_integer(json_array_get(pr, 0)) ||
		    !json_is_integer(json_array_get(pr, 1)) || l < 0 || l >= w->hp.dec_layers ||
		    h < 0 || h >= w->hp.n_heads)
			return st_errf(-ST_CORRUPT, err, errlen,
				       "config.json alignment_heads[%zu]: expected [layer < %d, head < "
				       "%d]",
				       i, w->hp.dec_layers, w->hp.n_heads);
		w->align_heads[i][0] = (int)l;
		w->align_heads[i][1] = (int)h;
	}
	w->n_align_heads = n;
	return 0;
}

int eng_whisper_load_ct(const struct eng_ct2 *ct2, enum eng_compute_type ct,
			struct eng_whisper **out, char *err, size_t errlen)
{
	*out = NULL;
	if ((unsigned)ct >= ENG_COMPUTE_COUNT)
		return st_errf(-ST_INVAL, err, errlen, "unknown compute type %d", (int)ct);
	if (strcmp(eng_ct2_spec_name(ct2), "WhisperSpec"))
		return st_errf(-ST_UNSUPPORTED, err, errlen, "not a WhisperSpec model (%s)",
			       eng_ct2_spec_name(ct2));
	struct eng_whisper *w = mem_calloc(1, sizeof(*w));
	if (!w)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	bool int8 = ct == ENG_COMPUTE_INT8 || ct == ENG_COMPUTE_INT8_FLOAT32 ||
		    (ct == ENG_COMPUTE_DEFAULT && ew_stored_int8(ct2));
	bool bf16 = ct == ENG_COMPUTE_BFLOAT16 || ct == ENG_COMPUTE_INT8_BFLOAT16;
	w->bf16 = bf16;
	w->i8_attn = int8;
	/* A decode step reads every layer's 1500 cross-attention keys and
	 * values, more bytes than all the decoder's weights: in bfloat16 it
	 * reads half (a dev_kv16_pack cache). No systematic WER cost measured for
	 * int8 (README); int8 keys and values were over the bar. */
	w->cross_bf16 = bf16 || int8;
	struct ew_ld ld = { .ct2 = ct2, .w = w, .int8_enc = int8, .bf16 = bf16,
			    .int8_dec = int8 || ct == ENG_COMPUTE_INT8_BFLOAT16, .err = err,
			    .errlen = errlen };
	ew_load_all(&ld);
	w->int8_enc = ld.int8_enc;
	w->int8_dec = ld.int8_dec;
	if (!ld.rc)
		ld.rc = ew_load_align_heads(w, ct2, err, errlen);
	if (!ld.rc) /* the host's set now: a cpu replica's first request waits less */
		ld.rc = eng_whisper_binds_init(w, err, errlen);
	if (ld.rc == -ST_UNSUPPORTED && bf16) { /* the cpu computes no bfloat16 */
		char why[512];
		snprintf(why, sizeof(why), "%s", err ? err : "");
		st_errf(ld.rc, err, errlen, "compute type %s %s; use int8 or float32 here",
			ct == ENG_COMPUTE_BFLOAT16 ? "bfloat16" : "int8_bfloat16", why);
	}
	if (ld.rc) {
		eng_whisper_destroy(w);
		return ld.rc;
	}
	*out = w;
	return 0;
}

void eng_whisper_destroy(struct eng_whisper *w)
{
	if (!w)
		return;
	eng_whisper_binds_free(w);
	for (size_t i = 0; i < w->n_allocs; i++)
		mem_free(w->allocs[i]);
	mem_free(w->allocs);
	mem_free(w->enc);
	mem_free(w->dec);
	mem_free(w);
}

/* The int8 rows of l, which every device copied (eng_whisper_seal). */
static void ew_drop_i8(struct eng_whisper *w, struct ew_linear *l)
{
	eng_whisper_untrack(w, l->i8,
			    (size_t)l->n_out * dev_mat_row_bytes(DEV_TYPE_I8R, (size_t)l->n_in));
	l->i8 = NULL;
}

void eng_whisper_seal(struct eng_whisper *w)
{
	eng_whisper_binds_seal(w);
	for (int i = 0; i < w->hp.enc_layers; i++) {
		struct ew_enc_layer *l = &w->enc[i];
		struct ew_linear *ls[] = { &l->qkv, &l->out, &l->ffn1, &l->ffn2 };
		for (size_t j = 0; j < sizeof(ls) / sizeof(ls[0]); j++)
			ew_drop_i8(w, ls[j]);
	}
	for (int i = 0; i < w->hp.dec_layers; i++) {
		struct ew_dec_layer *l = &w->dec[i];
		struct ew_linear *ls[] = { &l->self_qkv, &l->self_out,	&l->cross_q, &l->cross_kv,
					   &l->cross_out, &l->ffn1,	&l->ffn2 };
		for (size_t j = 0; j < sizeof(ls) / sizeof(ls[0]); j++)
			ew_drop_i8(w, ls[j]);
	}
	eng_whisper_untrack(w, w->tok_emb_i8,
			    (size_t)w->hp.n_vocab *
				    dev_mat_row_bytes(DEV_TYPE_I8R, (size_t)w->hp.d_model));
	w->tok_emb_i8 = NULL;
}

const struct eng_whisper_hp *eng_whisper_hp(const struct eng_whisper *w)
{
	return &w->hp;
}

size_t eng_whisper_weight_bytes(const struct eng_whisper *w)
{
	return w->weight_bytes;
}

const int (*eng_whisper_align_heads(const struct eng_whisper *w, size_t *n))[2]
{
	*n = w->n_align_heads;
	return (const int (*)[2])w->align_heads;
}

const char *eng_whisper_compute_type(const struct eng_whisper *w)
{
	if (w->bf16)
		return w->int8_dec ? "int8_bfloat16" : "bfloat16";
	return w->int8_enc ? "int8" : "float32";
}
