/* eng_asr_words.c - word-level timestamps from the decoder's cross-
 * attention: the alignment heads' attention over the window's frames,
 * normalised, median-filtered and averaged, then dynamic time warping of
 * the text tokens against the frames; words are the tokens grouped at
 * spaces, each with the time its first token is reached and the mean
 * probability of its tokens.
 *
 * Source followed: faster-whisper 1.2.1 transcribe.py (add_word_timestamps,
 * find_alignment, merge_punctuations) and tokenizer.py
 * (split_to_word_tokens), which the project's reference outputs come
 * from, and CTranslate2 4.x (src/models/whisper.cc WhisperReplica::align
 * and compute_alignments, src/dtw.cc negative_dtw, ops/median_filter):
 * the same steps as openai/whisper timing.py. Languages written without
 * spaces (zh, ja, th, lo, my, yue) split at every whole character, the
 * others at spaces.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/asr/eng_asr_int.h"
#include "engine/models/eng_whisper.h"
#include "engine/tok/eng_whisper_tok.h"

#define EW_TOKENS_PER_S 50.0  /* encoder positions per second */
#define EW_MEDIAN_WIDTH 7     /* median filter over frames (find_alignment) */
#define EW_PREPEND "\"'\u201c\u00bf([{-"
#define EW_APPEND "\"'.\u3002,\uff0c!\uff01?\uff1f:\uff1a\u201d)]}\u3001"
#define EW_SENTENCE_END ".\u3002!\uff01?\uff1f"
#define EW_PUNCTUATION "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~" /* Python string.punctuation */

/* One word while it is assembled: text, its tokens [t0, t0 + nt) of the
 * text tokens, times in seconds from the window start, probability. */
struct ew_word {
	char *text;
	size_t t0, nt;
	double start, end;
	float prob;
};

struct ew_words {
	struct ew_word *v;
	size_t n, cap;
};

static void ew_words_fini(struct ew_words *w)
{
	for (size_t i = 0; i < w->n; i++)
		mem_free(w->v[i].text);
	mem_free(w->v);
	*w = (struct ew_words){ 0 };
}

/* Append a word owning text (freed on failure). */
static int ew_words_push(struct ew_words *w, char *text, size_t t0, size_t nt)
{
	if (!text)
		return -ST_NOMEM;
	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 64;
		struct ew_word *v = mem_realloc(w->v, cap * sizeof(*v));
		if (!v) {
			mem_free(text);
			return -ST_NOMEM;
		}
		w->v = v;
		w->cap = cap;
	}
	w->v[w->n++] = (struct ew_word){ .text = text, .t0 = t0, .nt = nt };
	return 0;
}

/* Python's `s in chars`: s is a substring of chars (the empty string is). */
static bool ew_in(const char *s, const char *chars)
{
	return strstr(chars, s) != NULL;
}

/* Python's `s.strip() in chars` (ASCII white space stripped; a stripped
 * text of 64 bytes or more is in no punctuation set here). */
static bool ew_stripped_in(const char *s, const char *chars)
{
	const char *e = s + strlen(s);
	char b[64];
	while (*s == ' ' || (*s >= '\t' && *s <= '\r'))
		s++;
	while (e > s && (e[-1] == ' ' || (e[-1] >= '\t' && e[-1] <= '\r')))
		e--;
	if ((size_t)(e - s) >= sizeof(b))
		return false;
	memcpy(b, s, (size_t)(e - s));
	b[e - s] = '\0';
	return ew_in(b, chars);
}

/* Characters (code points) of well-formed UTF-8 s[0, n). */
static size_t ew_cp_count(const char *s, size_t n)
{
	size_t c = 0;
	for (size_t i = 0; i < n; i++)
		c += ((unsigned char)s[i] & 0xC0) != 0x80;
	return c;
}

/* The character index of the first U+FFFD in s, or -1. */
static long ew_fffd_index(const char *s)
{
	const char *f = strstr(s, "\xEF\xBF\xBD");
	return f ? (long)ew_cp_count(s, (size_t)(f - s)) : -1;
}

/* Whether character idx of s is U+FFFD. */
static bool ew_fffd_at(const char *s, size_t idx)
{
	size_t c = 0;
	for (const char *p = s; *p; p++) {
		if (((unsigned char)*p & 0xC0) == 0x80)
			continue;
		if (c++ == idx)
			return !strncmp(p, "\xEF\xBF\xBD", 3);
	}
	return false;
}

static char *ew_concat(const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b);
	char *s = mem_alloc(na + nb + 1);
	if (s) {
		memcpy(s, a, na);
		memcpy(s + na, b, nb + 1);
	}
	return s;
}

/* split_tokens_on_unicode over text [n] + <|endoftext|>: cut wherever the
 * tokens so far decode without a replacement character of their own. The
 * end-of-text token closes the last piece (its text is not needed). */
static int ew_split_unicode(const struct eng_whisper_tok *tok, const int32_t *text, size_t n,
			    struct ew_words *out)
{
	char *full = eng_whisper_tok_text(tok, text, n);
	if (!full)
		return -ST_NOMEM;
	size_t full_cp = ew_cp_count(full, strlen(full)), offset = 0, start = 0;
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		char *dec = eng_whisper_tok_text(tok, text + start, i + 1 - start);
		if (!dec) {
			rc = -ST_NOMEM;
			break;
		}
		long idx = ew_fffd_index(dec);
		if (idx < 0 || ((size_t)idx + offset < full_cp && ew_fffd_at(full, (size_t)idx + offset))) {
			offset += ew_cp_count(dec, strlen(dec));
			rc = ew_words_push(out, dec, start, i + 1 - start);
			start = i + 1;
		} else {
			mem_free(dec);
		}
	}
	if (!rc)
		rc = ew_words_push(out, start < n ? eng_whisper_tok_text(tok, text + start, n - start)
						  : mem_strdup(""),
				   start, n - start + 1);
	mem_free(full);
	return rc;
}

/* split_tokens_on_spaces: a piece starting with a space, a punctuation
 * piece, or the end-of-text piece starts a new word; the rest join the
 * word before them. */
static int ew_split_words(const struct eng_whisper_tok *tok, const int32_t *text, size_t n,
			  struct ew_words *out)
{
	struct ew_words sub = { 0 };
	int rc = ew_split_unicode(tok, text, n, &sub);
	for (size_t i = 0; i < sub.n && !rc; i++) {
		struct ew_word *s = &sub.v[i];
		bool special = s->t0 >= n; /* the end-of-text piece alone */
		bool punct = ew_stripped_in(s->text, EW_PUNCTUATION);
		if (special || s->text[0] == ' ' || punct || out->n == 0) {
			rc = ew_words_push(out, s->text, s->t0, s->nt);
			s->text = NULL;
		} else {
			struct ew_word *last = &out->v[out->n - 1];
			char *j = ew_concat(last->text, s->text);
			if (!j) {
				rc = -ST_NOMEM;
				break;
			}
			mem_free(last->text);
			last->text = j;
			last->nt += s->nt;
		}
	}
	ew_words_fini(&sub);
	return rc;
}

/* In place over x [rows, cols]: CTranslate2's MedianFilter along each row
 * (window EW_MEDIAN_WIDTH, reflected at the edges; rows no longer than
 * half the window unchanged). */
static int ew_float_cmp(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

static int ew_median_filter(float *x, size_t rows, size_t cols)
{
	long r = EW_MEDIAN_WIDTH / 2, c = (long)cols;
	if (c <= r)
		return 0;
	float *row = mem_alloc(cols * sizeof(float)), win[EW_MEDIAN_WIDTH];
	if (!row)
		return -ST_NOMEM;
	for (size_t i = 0; i < rows; i++) {
		float *in = x + i * cols;
		memcpy(row, in, cols * sizeof(float));
		for (long j = 0; j < c; j++) {
			for (long k = -r; k <= r; k++) {
				long at = labs(j + k);
				if (at >= c)
					at = c - (at - c) - 2;
				win[k + r] = row[at];
			}
			qsort(win, EW_MEDIAN_WIDTH, sizeof(float), ew_float_cmp);
			in[j] = win[r];
		}
	}
	mem_free(row);
	return 0;
}

/* compute_alignments' weights: per head, each row's softmax over the
 * frames, each frame standardised over the rows (mean 0, variance 1: the
 * LayerNorm over axis -2 with epsilon 0), the median filter; then the mean
 * over heads, into w [rows, cols]. s [heads][rows][cols] is overwritten. */
static int ew_weights(float *s, size_t heads, size_t rows, size_t cols, float *w)
{
	int rc = 0;
	memset(w, 0, rows * cols * sizeof(float));
	for (size_t h = 0; h < heads && !rc; h++) {
		float *a = s + h * rows * cols;
		for (size_t i = 0; i < rows; i++) {
			float *x = a + i * cols, mx = -INFINITY, sum = 0.0f;
			for (size_t j = 0; j < cols; j++)
				mx = x[j] > mx ? x[j] : mx;
			for (size_t j = 0; j < cols; j++)
				sum += x[j] = expf(x[j] - mx);
			for (size_t j = 0; j < cols; j++)
				x[j] /= sum;
		}
		for (size_t j = 0; j < cols; j++) {
			double mean = 0, var = 0;
			for (size_t i = 0; i < rows; i++)
				mean += a[i * cols + j];
			mean /= (double)rows;
			for (size_t i = 0; i < rows; i++) {
				double dlt = a[i * cols + j] - mean;
				var += dlt * dlt;
			}
			var /= (double)rows;
			double inv = var > 0 ? 1.0 / sqrt(var) : 0.0;
			for (size_t i = 0; i < rows; i++)
				a[i * cols + j] = (float)((a[i * cols + j] - mean) * inv);
		}
		rc = ew_median_filter(a, rows, cols);
		for (size_t k = 0; !rc && k < rows * cols; k++)
			w[k] += a[k];
	}
	for (size_t k = 0; k < rows * cols; k++)
		w[k] /= (float)heads;
	return rc;
}

/* negative_dtw over x [n, m]: the cheapest monotone path through -x from
 * (0, 0) to (n-1, m-1); jump[i] receives the first column the path visits
 * in row i (n entries). Ties go as CTranslate2's: diagonal only when
 * strictly cheapest, then up, else left. */
static int ew_dtw(const float *x, size_t n, size_t m, size_t *jump)
{
	size_t W = m + 1;
	float *cost = mem_alloc((n + 1) * W * sizeof(float));
	unsigned char *trace = mem_alloc((n + 1) * W);
	if (!cost || !trace) {
		mem_free(cost);
		mem_free(trace);
		return -ST_NOMEM;
	}
	for (size_t k = 0; k < (n + 1) * W; k++)
		cost[k] = INFINITY;
	cost[0] = 0;
	for (size_t j = 1; j <= m; j++)
		for (size_t i = 1; i <= n; i++) {
			float c0 = cost[(i - 1) * W + j - 1], c1 = cost[(i - 1) * W + j];
			float c2 = cost[i * W + j - 1], c;
			unsigned char t;
			if (c0 < c1 && c0 < c2) {
				c = c0;
				t = 0;
			} else if (c1 < c0 && c1 < c2) {
				c = c1;
				t = 1;
			} else {
				c = c2;
				t = 2;
			}
			cost[i * W + j] = -x[(i - 1) * m + j - 1] + c;
			trace[i * W + j] = t;
		}
	for (size_t j = 0; j <= m; j++)
		trace[j] = 2;
	for (size_t i = 0; i <= n; i++)
		trace[i * W] = 1;
	/* walk back; the last column seen in row i - 1 is its first */
	for (size_t i = n, j = m; i > 0 || j > 0;) {
		if (i > 0)
			jump[i - 1] = j - 1;
		unsigned char t = trace[i * W + j];
		if (t == 0) {
			i--;
			j--;
		} else if (t == 1) {
			i--;
		} else {
			j--;
		}
	}
	mem_free(cost);
	mem_free(trace);
	return 0;
}

/* find_alignment: the words of text [n] with times (seconds from the
 * window start) and probabilities, into out (empty when there are no
 * frames or no words). */
static int ew_align(const struct eng__asr_words_in *in, const int32_t *text, size_t n,
		    struct ew_words *out)
{
	size_t n_heads, S = in->n_sot, N = S + n + 2, C = in->n_frames / 2;
	const int (*heads)[2] = eng_whisper_align_heads(in->w, &n_heads);
	const struct eng_whisper_hp *hp = eng_whisper_hp(in->w);
	if (C == 0 || n_heads == 0 || N > (size_t)hp->n_text_ctx)
		return 0;
	static const char *const unspaced[] = { "zh", "ja", "th", "lo", "my", "yue" };
	bool by_char = false;
	for (size_t i = 0; in->language && i < sizeof(unspaced) / sizeof(*unspaced); i++)
		by_char |= !strcmp(in->language, unspaced[i]);
	int rc = by_char ? ew_split_unicode(in->tok, text, n, out)
			 : ew_split_words(in->tok, text, n, out);
	if (rc || out->n <= 1) {
		ew_words_fini(out);
		return rc;
	}
	int32_t *seq = mem_alloc(N * sizeof(*seq));
	float *scores = mem_alloc(n_heads * N * C * sizeof(float));
	float *w = mem_alloc(N * C * sizeof(float));
	float *probs = mem_alloc((n + 1) * sizeof(float));
	size_t *jump = mem_alloc((n + 1) * sizeof(size_t));
	rc = seq && scores && w && probs && jump ? 0 : -ST_NOMEM;
	if (rc)
		goto out;
	memcpy(seq, in->sot, S * sizeof(*seq));
	seq[S] = in->tok->no_timestamps;
	memcpy(seq + S + 1, text, n * sizeof(*seq));
	seq[N - 1] = in->tok->eot;
	/* rows S .. S + n: <|notimestamps|> and the text; row S + i predicts
	 * text[i] */
	rc = eng_whisper_align_pass(in->w, in->e, in->q, seq, N, heads, n_heads, C, S, n,
				    in->tok->eot, scores, probs);
	if (!rc)
		rc = ew_weights(scores, n_heads, N, C, w);
	if (!rc)
		rc = ew_dtw(w + S * C, n + 1, C, jump);
	if (rc)
		goto out;
	out->n--; /* the end-of-text word has no end time: zip() drops it */
	mem_free(out->v[out->n].text);
	for (size_t k = 0; k < out->n; k++) {
		struct ew_word *x = &out->v[k];
		size_t b0 = x->t0, b1 = x->t0 + x->nt;
		x->start = (double)jump[b0] / EW_TOKENS_PER_S;
		x->end = (double)jump[b1] / EW_TOKENS_PER_S;
		float sum = 0.0f;
		for (size_t i = b0; i < b1; i++)
			sum += probs[i];
		x->prob = x->nt ? sum / (float)x->nt : 0.0f;
	}
out:
	if (rc)
		ew_words_fini(out);
	mem_free(seq);
	mem_free(scores);
	mem_free(w);
	mem_free(probs);
	mem_free(jump);
	return rc;
}

static int ew_double_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* numpy's median of the non-zero durations (0 for none). */
static double ew_median_duration(const struct ew_words *a)
{
	double *d = mem_alloc((a->n + 1) * sizeof(double));
	size_t k = 0;
	if (!d)
		return 0.0;
	for (size_t i = 0; i < a->n; i++)
		if (a->v[i].end - a->v[i].start != 0)
			d[k++] = a->v[i].end - a->v[i].start;
	qsort(d, k, sizeof(double), ew_double_cmp);
	double m = k == 0 ? 0.0 : k % 2 ? d[k / 2] : (d[k / 2 - 1] + d[k / 2]) / 2;
	mem_free(d);
	return m;
}

/* Move word i's text and tokens onto word j (prefix: before its own). */
static int ew_merge(struct ew_words *a, size_t from, size_t to, bool prefix)
{
	struct ew_word *f = &a->v[from], *t = &a->v[to];
	char *s = prefix ? ew_concat(f->text, t->text) : ew_concat(t->text, f->text);
	if (!s)
		return -ST_NOMEM;
	mem_free(t->text);
	t->text = s;
	t->nt += f->nt;
	f->text[0] = '\0';
	f->nt = 0;
	return 0;
}

/* merge_punctuations: opening marks join the word after them, closing
 * marks the word before; the emptied entries stay (no text, no tokens). */
static int ew_merge_punctuation(struct ew_words *a)
{
	int rc = 0;
	for (long i = (long)a->n - 2, j = (long)a->n - 1; i >= 0 && !rc; i--) {
		if (a->v[i].text[0] == ' ' && ew_stripped_in(a->v[i].text, EW_PREPEND))
			rc = ew_merge(a, (size_t)i, (size_t)j, true);
		else
			j = i;
	}
	for (size_t i = 0, j = 1; j < a->n && !rc; j++) {
		const char *prev = a->v[i].text;
		size_t lp = strlen(prev);
		if (!(lp && prev[lp - 1] == ' ') && ew_in(a->v[j].text, EW_APPEND))
			rc = ew_merge(a, j, i, false);
		else
			i = j;
	}
	return rc;
}

double eng__asr_round2(double x)
{
	char b[64];
	snprintf(b, sizeof(b), "%.2f", x);
	return strtod(b, NULL);
}

/* The words of cut c: a new array into c->words; NULL when none. */
static int ew_cut_words(struct eng__asr_cut *c, const struct ew_words *a, size_t *wi,
			double offset, size_t n_text)
{
	size_t saved = 0, n = 0, first = *wi;
	while (*wi < a->n && saved < n_text)
		saved += a->v[(*wi)++].nt;
	for (size_t k = first; k < *wi; k++)
		n += a->v[k].text[0] != '\0';
	c->words = n ? mem_calloc(n, sizeof(*c->words)) : NULL;
	c->n_words = 0;
	if (n && !c->words)
		return -ST_NOMEM;
	for (size_t k = first; k < *wi; k++) {
		if (!a->v[k].text[0])
			continue;
		struct eng_word *w = &c->words[c->n_words];
		w->word = mem_strdup(a->v[k].text);
		if (!w->word)
			return -ST_NOMEM;
		w->start_s = eng__asr_round2(offset + a->v[k].start);
		w->end_s = eng__asr_round2(offset + a->v[k].end);
		w->probability = a->v[k].prob;
		c->n_words++;
	}
	return 0;
}

/* add_word_timestamps' boundary heuristics on one cut's words: a first
 * word after a pause no longer than twice the median, the cut's start and
 * end moved to its words' unless a word overruns it by 0.5 s. */
static void ew_cut_bounds(struct eng__asr_cut *c, double med, double mx, double *last)
{
	struct eng_word *w = c->words;
	size_t n = c->n_words;
	if (n == 0)
		return;
	if (w[0].end_s - *last > med * 4 &&
	    (w[0].end_s - w[0].start_s > mx || (n > 1 && w[1].end_s - w[0].start_s > mx * 2))) {
		if (n > 1 && w[1].end_s - w[1].start_s > mx) {
			double b = fmax(w[1].end_s / 2, w[1].end_s - mx);
			w[0].end_s = w[1].start_s = b;
		}
		w[0].start_s = fmax(0, w[0].end_s - mx);
	}
	if (c->start < w[0].end_s && c->start - 0.5 > w[0].start_s)
		w[0].start_s = fmax(0, fmin(w[0].end_s - med, c->start));
	else
		c->start = w[0].start_s;
	if (c->end > w[n - 1].start_s && c->end + 0.5 < w[n - 1].end_s)
		w[n - 1].end_s = fmax(w[n - 1].start_s + med, c->end);
	else
		c->end = w[n - 1].end_s;
	*last = c->end;
}

int eng__asr_words(const struct eng__asr_words_in *in, struct eng__asr_cut *cuts, size_t n_cuts)
{
	size_t n_text = 0;
	for (size_t i = 0; i < n_cuts; i++)
		for (size_t k = 0; k < cuts[i].n_tokens; k++)
			n_text += cuts[i].tokens[k] < in->tok->eot;
	int32_t *text = mem_alloc((n_text + 1) * sizeof(*text));
	if (!text)
		return -ST_NOMEM;
	n_text = 0;
	for (size_t i = 0; i < n_cuts; i++)
		for (size_t k = 0; k < cuts[i].n_tokens; k++)
			if (cuts[i].tokens[k] < in->tok->eot)
				text[n_text++] = cuts[i].tokens[k];
	struct ew_words a = { 0 };
	int rc = ew_align(in, text, n_text, &a);
	mem_free(text);
	double med = fmin(0.7, ew_median_duration(&a)), mx = med * 2;
	/* words at sentence ends no longer than twice the median */
	for (size_t i = 1; !rc && i < a.n && med > 0; i++) {
		if (a.v[i].end - a.v[i].start <= mx)
			continue;
		if (ew_in(a.v[i].text, EW_SENTENCE_END))
			a.v[i].end = a.v[i].start + mx;
		else if (ew_in(a.v[i - 1].text, EW_SENTENCE_END))
			a.v[i].start = a.v[i].end - mx;
	}
	if (!rc)
		rc = ew_merge_punctuation(&a);
	double offset = (double)in->seek / 100.0, last = in->last_speech;
	for (size_t i = 0, wi = 0; !rc && i < n_cuts; i++) {
		size_t nt = 0;
		for (size_t k = 0; k < cuts[i].n_tokens; k++)
			nt += cuts[i].tokens[k] < in->tok->eot;
		rc = ew_cut_words(&cuts[i], &a, &wi, offset, nt);
		if (!rc)
			ew_cut_bounds(&cuts[i], med, mx, &last);
	}
	ew_words_fini(&a);
	return rc;
}

void eng__asr_cut_fini(struct eng__asr_cut *c)
{
	for (size_t i = 0; i < c->n_words; i++)
		mem_free(c->words[i].word);
	mem_free(c->words);
	c->words = NULL;
	c->n_words = 0;
}
