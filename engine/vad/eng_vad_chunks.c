/* eng_vad_chunks.c - faster-whisper 1.2.1's collect_chunks and
 * SpeechTimestampsMap (faster_whisper/vad.py) over speech spans: grouping
 * the spans' audio into chunks, and mapping times in the concatenated
 * speech back to the original audio.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/vad/eng_vad.h"

int eng_vad_collect(const struct eng_vad_span *spans, size_t n_spans, double max_s,
		    struct eng_vad_chunk **chunks, size_t *n_chunks)
{
	*chunks = NULL;
	*n_chunks = 0;
	/* a split emits one chunk per span at most, plus the last */
	struct eng_vad_chunk *out = mem_calloc(n_spans + 1, sizeof(*out));
	if (!out)
		return -ST_NOMEM;
	struct eng_vad_chunk cur = {0};
	int64_t total = 0;
	size_t n = 0;
	for (size_t k = 0; k < n_spans; k++) {
		int64_t len = spans[k].end - spans[k].start;
		if ((double)(cur.n_samples + len) > max_s * ENG_VAD_SAMPLE_RATE) {
			cur.offset_samples = total;
			out[n++] = cur;
			total += cur.n_samples;
			cur = (struct eng_vad_chunk){.audio_first = k,
						     .audio_count = 1,
						     .seg_first = k + 1,
						     .n_samples = len};
			continue;
		}
		cur.audio_count++;
		cur.seg_count++;
		cur.n_samples += len;
	}
	cur.offset_samples = total;
	out[n++] = cur;
	*chunks = out;
	*n_chunks = n;
	return 0;
}

void eng_vad_chunk_audio(const float *audio, const struct eng_vad_span *spans,
			 const struct eng_vad_chunk *c, float *out)
{
	for (size_t k = c->audio_first; k < c->audio_first + c->audio_count; k++) {
		size_t len = (size_t)(spans[k].end - spans[k].start);
		memcpy(out, audio + spans[k].start, len * sizeof(*out));
		out += len;
	}
}

int eng_vad_map_init(struct eng_vad_map *m, const struct eng_vad_span *spans, size_t n)
{
	*m = (struct eng_vad_map){0};
	if (n == 0)
		return -ST_INVAL;
	m->chunk_end_sample = mem_alloc(n * sizeof(*m->chunk_end_sample));
	m->total_silence_before = mem_alloc(n * sizeof(*m->total_silence_before));
	if (!m->chunk_end_sample || !m->total_silence_before) {
		eng_vad_map_fini(m);
		return -ST_NOMEM;
	}
	int64_t prev_end = 0, silent = 0;
	for (size_t i = 0; i < n; i++) {
		silent += spans[i].start - prev_end;
		prev_end = spans[i].end;
		m->chunk_end_sample[i] = spans[i].end - silent;
		m->total_silence_before[i] = (double)silent / ENG_VAD_SAMPLE_RATE;
	}
	m->n = n;
	return 0;
}

/* ev_round2 - Python's round(x, 2): the correctly rounded 2-decimal
 * string (glibc's printf rounds the exact binary value, ties to even, as
 * CPython's dtoa does) read back. */
static double ev_round2(double x)
{
	char buf[400];
	if (!isfinite(x))
		return x;
	snprintf(buf, sizeof(buf), "%.2f", x);
	return strtod(buf, NULL);
}

/* ev_chunk_index - get_chunk_index: the span whose concatenated end is
 * the sample at time_s when is_end, else bisect_right, clamped. */
static size_t ev_chunk_index(const struct eng_vad_map *m, double time_s, int is_end)
{
	int64_t sample = (int64_t)(time_s * ENG_VAD_SAMPLE_RATE);
	if (is_end)
		for (size_t i = 0; i < m->n; i++)
			if (m->chunk_end_sample[i] == sample)
				return i;
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (sample < m->chunk_end_sample[mid])
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo < m->n - 1 ? lo : m->n - 1;
}

long eng_vad_map_chunk(const struct eng_vad_map *m, double time_s, int is_end)
{
	return m->n ? (long)ev_chunk_index(m, time_s, is_end) : -1;
}

double eng_vad_map_time(const struct eng_vad_map *m, double time_s, long chunk_index, int is_end)
{
	if (m->n == 0 || (chunk_index >= 0 && (size_t)chunk_index >= m->n))
		return NAN;
	size_t i = chunk_index >= 0 ? (size_t)chunk_index : ev_chunk_index(m, time_s, is_end);
	return ev_round2(m->total_silence_before[i] + time_s);
}

void eng_vad_map_fini(struct eng_vad_map *m)
{
	mem_free(m->chunk_end_sample);
	mem_free(m->total_silence_before);
	*m = (struct eng_vad_map){0};
}
