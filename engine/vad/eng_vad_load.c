/* eng_vad_load.c - Silero VAD weights from silero-vad 6.2.3's
 * silero_vad_16k.safetensors (tensor names of the wheel's
 * tinygrad_model.py). Each tensor must be present, F32 and exactly the
 * expected shape; the values are copied into one float block, so the file
 * is unmapped again before eng_vad_load returns.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/format/eng_safetensors.h"
#include "engine/vad/eng_vad_int.h"

/* The encoder: channels in, out, stride (silero v5/v6's 16 kHz branch). */
static const int ev_conv_shape[EV_NCONV][3] = {
	{EV_NBIN, 128, 1},
	{128, 64, 2},
	{64, 64, 2},
	{64, EV_HID, 1},
};

/* Load-time reader: the file, the destination block and the first error. */
struct ev_ld {
	const struct eng_st *st;
	const char *path;
	float *next; /* next free float of the block */
	char *err;
	size_t errlen;
	int rc; /* 0, or the first failure (later copies do nothing) */
};

/* ev_take - copy tensor name (F32, shape dims[n_dims]) into the block and
 * return it, or NULL after recording the first error. */
static float *ev_take(struct ev_ld *ld, const char *name, int n_dims, const uint64_t *dims)
{
	if (ld->rc)
		return NULL;
	const struct eng_st_tensor *t = eng_st_find(ld->st, name);
	bool ok = t && t->dtype == ENG_ST_DTYPE_F32 && t->n_dims == n_dims;
	for (int i = 0; ok && i < n_dims; i++)
		ok = t->shape[i] == dims[i];
	if (!ok) {
		ld->rc = st_errf(t ? -ST_CORRUPT : -ST_NOTFOUND, ld->err, ld->errlen,
				 "%s: tensor %s %s", ld->path, name,
				 t ? "is not F32 of the Silero VAD shape" : "is missing");
		return NULL;
	}
	float *dst = ld->next;
	memcpy(dst, t->data, t->size_bytes);
	ld->next += t->n_elems;
	return dst;
}

static size_t ev_block_floats(void)
{
	size_t n = 2 * EV_NBIN * EV_NFFT + 2 * 4 * EV_HID * EV_HID + 2 * 4 * EV_HID + EV_HID + 1;
	for (int i = 0; i < EV_NCONV; i++)
		n += (size_t)ev_conv_shape[i][1] * (ev_conv_shape[i][0] * 3 + 1);
	return n;
}

static void ev_take_convs(struct ev_ld *ld, struct eng_vad *v)
{
	char name[32];
	for (int i = 0; i < EV_NCONV; i++) {
		struct ev_conv *c = &v->conv[i];
		c->c_in = ev_conv_shape[i][0];
		c->c_out = ev_conv_shape[i][1];
		c->stride = ev_conv_shape[i][2];
		uint64_t wd[3] = {(uint64_t)c->c_out, (uint64_t)c->c_in, 3};
		snprintf(name, sizeof(name), "conv%d.weight", i + 1);
		c->w = ev_take(ld, name, 3, wd);
		snprintf(name, sizeof(name), "conv%d.bias", i + 1);
		c->b = ev_take(ld, name, 1, &wd[0]);
	}
}

static void ev_take_all(struct ev_ld *ld, struct eng_vad *v)
{
	const uint64_t stft[3] = {2 * EV_NBIN, 1, EV_NFFT};
	const uint64_t gates[2] = {4 * EV_HID, EV_HID};
	const uint64_t out[3] = {1, EV_HID, 1};
	v->stft = ev_take(ld, "stft_conv.weight", 3, stft);
	ev_take_convs(ld, v);
	v->w_ih = ev_take(ld, "lstm_cell.weight_ih", 2, gates);
	v->w_hh = ev_take(ld, "lstm_cell.weight_hh", 2, gates);
	v->b_ih = ev_take(ld, "lstm_cell.bias_ih", 1, gates);
	v->b_hh = ev_take(ld, "lstm_cell.bias_hh", 1, gates);
	v->w_out = ev_take(ld, "final_conv.weight", 3, out);
	const float *b = ev_take(ld, "final_conv.bias", 1, out);
	if (b)
		v->b_out = *b;
}

int eng_vad_load(const char *path, struct eng_vad **out, char *err, size_t errlen)
{
	*out = NULL;
	struct eng_st *st;
	int rc = eng_st_open(path, &st, err, errlen);
	if (rc)
		return rc;
	struct eng_vad *v = mem_calloc(1, sizeof(*v));
	if (v)
		v->block = mem_alloc(ev_block_floats() * sizeof(*v->block));
	if (!v || !v->block) {
		rc = st_errf(-ST_NOMEM, err, errlen, "%s: out of memory", path);
		goto out_free;
	}
	struct ev_ld ld = {.st = st, .path = path, .next = v->block, .err = err, .errlen = errlen};
	ev_take_all(&ld, v);
	rc = ld.rc;
	if (rc)
		goto out_free;
	eng_st_destroy(st);
	*out = v;
	return 0;
out_free:
	eng_vad_destroy(v);
	eng_st_destroy(st);
	return rc;
}

void eng_vad_destroy(struct eng_vad *vad)
{
	if (!vad)
		return;
	mem_free(vad->block);
	mem_free(vad);
}
