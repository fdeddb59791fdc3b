/* eng_gguf_val.c - GGUF metadata value views and the typed getters by key
 * (contract in eng_gguf.h). Works only through the public header: a view
 * points at bytes eng_gguf_open already validated, so walking it needs no
 * further bounds checks (the sizes below cannot exceed the checked ones).
 */
#include <string.h>

#include "common/st.h"
#include "engine/format/eng_gguf.h"

#define GGUF_ARRAY_HEAD 12u /* u32 element type + u64 length */

/* ---- value views --------------------------------------------------------- */

/* raw_int - an integer view as a sign flag plus magnitude bits. */
static int raw_int(const struct eng_gguf_val *v, bool *neg, uint64_t *mag)
{
	union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
		uint64_t u64; int64_t i64; } x;
	int64_t s;

	if (v->type >= ENG_GGUF_VTYPE_COUNT || !eng_gguf_vtype_size(v->type) ||
	    v->type == ENG_GGUF_VTYPE_FLOAT32 || v->type == ENG_GGUF_VTYPE_FLOAT64 ||
	    v->type == ENG_GGUF_VTYPE_BOOL)
		return -ST_INVAL;
	memcpy(&x, v->p, eng_gguf_vtype_size(v->type));
	switch (v->type) {
	case ENG_GGUF_VTYPE_UINT8: *neg = false; *mag = x.u8; return 0;
	case ENG_GGUF_VTYPE_UINT16: *neg = false; *mag = x.u16; return 0;
	case ENG_GGUF_VTYPE_UINT32: *neg = false; *mag = x.u32; return 0;
	case ENG_GGUF_VTYPE_UINT64: *neg = false; *mag = x.u64; return 0;
	case ENG_GGUF_VTYPE_INT8: s = x.i8; break;
	case ENG_GGUF_VTYPE_INT16: s = x.i16; break;
	case ENG_GGUF_VTYPE_INT32: s = x.i32; break;
	default: s = x.i64; break;
	}
	*neg = s < 0;
	*mag = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
	return 0;
}

int eng_gguf_val_u64(const struct eng_gguf_val *v, uint64_t *out)
{
	bool neg;
	uint64_t mag;

	if (raw_int(v, &neg, &mag) || neg)
		return -ST_INVAL;
	*out = mag;
	return 0;
}

int eng_gguf_val_i64(const struct eng_gguf_val *v, int64_t *out)
{
	bool neg;
	uint64_t mag;

	if (raw_int(v, &neg, &mag))
		return -ST_INVAL;
	if (!neg && mag > (uint64_t)INT64_MAX)
		return -ST_INVAL;
	*out = neg ? (int64_t)(0 - mag) : (int64_t)mag; /* two's complement; INT64_MIN round-trips */
	return 0;
}

int eng_gguf_val_f64(const struct eng_gguf_val *v, double *out)
{
	float f;

	if (v->type == ENG_GGUF_VTYPE_FLOAT64) {
		memcpy(out, v->p, 8);
		return 0;
	}
	if (v->type != ENG_GGUF_VTYPE_FLOAT32)
		return -ST_INVAL;
	memcpy(&f, v->p, 4);
	*out = f;
	return 0;
}

int eng_gguf_val_bool(const struct eng_gguf_val *v, bool *out)
{
	if (v->type != ENG_GGUF_VTYPE_BOOL)
		return -ST_INVAL;
	*out = v->p[0] != 0;
	return 0;
}

int eng_gguf_val_str(const struct eng_gguf_val *v, const char **s, uint64_t *len)
{
	if (v->type != ENG_GGUF_VTYPE_STRING)
		return -ST_INVAL;
	memcpy(len, v->p, 8);
	*s = (const char *)v->p + 8;
	return 0;
}

int eng_gguf_arr_info(const struct eng_gguf_val *arr, enum eng_gguf_vtype *elem_type, uint64_t *n)
{
	uint32_t et;

	if (arr->type != ENG_GGUF_VTYPE_ARRAY)
		return -ST_INVAL;
	memcpy(&et, arr->p, 4);
	memcpy(n, arr->p + 4, 8);
	*elem_type = et;
	return 0;
}

/* val_size - bytes of an already validated value of type at p. */
static uint64_t val_size(uint32_t type, const uint8_t *p)
{
	uint64_t n;

	if (type == ENG_GGUF_VTYPE_STRING) {
		memcpy(&n, p, 8);
		return 8 + n;
	}
	if (type != ENG_GGUF_VTYPE_ARRAY)
		return eng_gguf_vtype_size(type);
	uint32_t et;
	memcpy(&et, p, 4);
	memcpy(&n, p + 4, 8);
	if (eng_gguf_vtype_size(et))
		return GGUF_ARRAY_HEAD + n * eng_gguf_vtype_size(et);
	uint64_t off = GGUF_ARRAY_HEAD;
	for (uint64_t i = 0; i < n; i++)
		off += val_size(et, p + off);
	return off;
}

bool eng_gguf_arr_next(const struct eng_gguf_val *arr, uint64_t *cursor, struct eng_gguf_val *out)
{
	enum eng_gguf_vtype et;
	uint64_t n;

	if (eng_gguf_arr_info(arr, &et, &n) || GGUF_ARRAY_HEAD + *cursor >= arr->size_bytes)
		return false;
	out->type = et;
	out->p = arr->p + GGUF_ARRAY_HEAD + *cursor;
	out->size_bytes = val_size(et, out->p);
	*cursor += out->size_bytes;
	return true;
}

int eng_gguf_arr_at(const struct eng_gguf_val *arr, uint64_t i, struct eng_gguf_val *out)
{
	enum eng_gguf_vtype et;
	uint64_t n, cursor = 0;

	if (eng_gguf_arr_info(arr, &et, &n))
		return -ST_INVAL;
	if (i >= n)
		return -ST_NOTFOUND;
	if (eng_gguf_vtype_size(et)) {
		out->type = et;
		out->size_bytes = eng_gguf_vtype_size(et);
		out->p = arr->p + GGUF_ARRAY_HEAD + i * eng_gguf_vtype_size(et);
		return 0;
	}
	for (uint64_t k = 0; k <= i; k++)
		if (!eng_gguf_arr_next(arr, &cursor, out))
			return -ST_NOTFOUND;
	return 0;
}

/* ---- typed getters by key ------------------------------------------------ */

/* kv_of - the value of key, or -ST_NOTFOUND. */
static int kv_of(const struct eng_gguf *g, const char *key, struct eng_gguf_val *v)
{
	long i = eng_gguf_find_kv(g, key);
	return i < 0 ? -ST_NOTFOUND : eng_gguf_kv_val(g, (size_t)i, v);
}

int eng_gguf_get_u64(const struct eng_gguf *g, const char *key, uint64_t *out)
{
	struct eng_gguf_val v;
	int rc = kv_of(g, key, &v);
	return rc ? rc : eng_gguf_val_u64(&v, out);
}

int eng_gguf_get_i64(const struct eng_gguf *g, const char *key, int64_t *out)
{
	struct eng_gguf_val v;
	int rc = kv_of(g, key, &v);
	return rc ? rc : eng_gguf_val_i64(&v, out);
}

int eng_gguf_get_u32(const struct eng_gguf *g, const char *key, uint32_t *out)
{
	uint64_t v;
	int rc = eng_gguf_get_u64(g, key, &v);
	if (rc)
		return rc;
	if (v > UINT32_MAX)
		return -ST_INVAL;
	*out = (uint32_t)v;
	return 0;
}

int eng_gguf_get_i32(const struct eng_gguf *g, const char *key, int32_t *out)
{
	int64_t v;
	int rc = eng_gguf_get_i64(g, key, &v);
	if (rc)
		return rc;
	if (v < INT32_MIN || v > INT32_MAX)
		return -ST_INVAL;
	*out = (int32_t)v;
	return 0;
}

int eng_gguf_get_f64(const struct eng_gguf *g, const char *key, double *out)
{
	struct eng_gguf_val v;
	int rc = kv_of(g, key, &v);
	return rc ? rc : eng_gguf_val_f64(&v, out);
}

int eng_gguf_get_f32(const struct eng_gguf *g, const char *key, float *out)
{
	double v;
	int rc = eng_gguf_get_f64(g, key, &v);
	if (!rc)
		*out = (float)v;
	return rc;
}

int eng_gguf_get_bool(const struct eng_gguf *g, const char *key, bool *out)
{
	struct eng_gguf_val v;
	int rc = kv_of(g, key, &v);
	return rc ? rc : eng_gguf_val_bool(&v, out);
}

int eng_gguf_get_arr(const struct eng_gguf *g, const char *key, struct eng_gguf_val *out)
{
	struct eng_gguf_val v;
	int rc = kv_of(g, key, &v);
	if (rc)
		return rc;
	if (v.type != ENG_GGUF_VTYPE_ARRAY)
		return -ST_INVAL;
	*out = v;
	return 0;
}
