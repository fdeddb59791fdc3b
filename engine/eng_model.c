/* eng_model.c - the model registry behind engine/eng.h.
 *
 * eng_create opens every configured model with the real readers
 * (eng_gguf.h, eng_ct2.h), keeping the handles (and so the read-only
 * mmaps) for the engine's lifetime. After eng_create returns, the registry
 * is immutable: every accessor is safe from any thread.
 */
#include "engine/eng.h"

#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"
#include "engine/format/eng_ct2.h"
#include "engine/format/eng_file.h"
#include "engine/format/eng_gguf.h"
#include "engine/asr/eng_asr_int.h"
#include "engine/models/eng_llm.h"
#include "engine/models/eng_whisper.h"
#include "engine/gen/eng_gen_int.h"
#include "engine/eng_int.h"
#include "engine/sched/eng_sched.h"
#include "engine/vad/eng_vad.h"

#define ENG_ERR_MAX 1024 /* longest reader message kept before prefixing */

static int load_gguf(struct eng_model *m, char *err, size_t errlen)
{
	if (m->compute_type != ENG_COMPUTE_DEFAULT && m->compute_type != ENG_COMPUTE_FLOAT32)
		return st_errf(-ST_UNSUPPORTED, err, errlen,
			       "%s: compute_type int8 or bfloat16 applies to CTranslate2 Whisper models only "
			       "(a GGUF model runs its own block types)",
			       m->path);
	const char *arch;

	int rc = eng_gguf_open(m->path, &m->gguf, err, errlen);
	if (rc)
		return rc;
	rc = eng_gguf_get_str(m->gguf, "general.architecture", &arch, NULL);
	if (rc)
		return st_errf(-ST_CORRUPT, err, errlen, "%s: general.architecture is %s", m->path,
			       rc == -ST_NOTFOUND ? "missing" : "not a string");
	m->arch = mem_strdup(arch);
	m->task = ENG_TASK_GENERATION;
	m->size_bytes = eng_gguf_tensor_bytes(m->gguf);
	if (!m->arch)
		return st_errf(-ST_NOMEM, err, errlen, "%s: out of memory", m->path);
	rc = eng__llm_model_load(m, err, errlen);
	return rc ? rc : eng__chat_load(m, err, errlen);
}

static int load_ct2(struct eng_model *m, char *err, size_t errlen)
{
	if (m->kv_cache_f16)
		return st_errf(-ST_UNSUPPORTED, err, errlen,
			       "%s: kv_cache_f16 applies to GGUF generation models only (a Whisper "
			       "decoder keeps its cache in its compute type)", m->path);
	if (m->max_model_len)
		return st_errf(-ST_UNSUPPORTED, err, errlen,
			       "%s: max_model_len applies to GGUF generation models only (a Whisper "
			       "decoder's context is fixed by the model)", m->path);
	int rc = eng_ct2_open(m->path, &m->ct2, err, errlen);
	if (rc)
		return rc;
	const char *spec = eng_ct2_spec_name(m->ct2);
	if (strncmp(spec, "Whisper", 7) != 0)
		return st_errf(
			-ST_UNSUPPORTED, err, errlen,
			"%s: spec '%s' is not a Whisper model (the only CTranslate2 family served)",
			m->path, spec);
	m->arch = mem_strdup(spec);
	m->task = ENG_TASK_TRANSCRIPTION;
	m->size_bytes = eng_ct2_var_bytes(m->ct2);
	if (!m->arch)
		return st_errf(-ST_NOMEM, err, errlen, "%s: out of memory", m->path);
	return eng__whisper_model_load(m, err, errlen);
}

/* The two families' replicas: their loops, and the weights each holds. */
static int asr_hold(struct eng_model *m, struct dev *d, void **set, char *err, size_t errlen)
{
	return eng_whisper_hold(m->whisper, d, set, err, errlen);
}

static void asr_release(struct eng_model *m, void *set)
{
	eng_whisper_release(m->whisper, set);
}

static int gen_hold(struct eng_model *m, struct dev *d, void **set, char *err, size_t errlen)
{
	return eng_llm_hold(m->llm, d, set, err, errlen);
}

static void gen_release(struct eng_model *m, void *set)
{
	eng_llm_release(m->llm, set);
}

static const struct eng__family asr_family = { eng__asr_loop, asr_hold, asr_release };
static const struct eng__family gen_family = { eng__gen_loop, gen_hold, gen_release };

/* model_load - fill m from spec; on error err holds the reader's line. */
static int model_load(struct eng_model *m, const struct eng_model_spec *spec, char *err, size_t errlen)
{
	if (!spec->path || !spec->path[0])
		return st_errf(-ST_INVAL, err, errlen, "no path given");
	if (spec->format < 0 || spec->format >= ENG_FORMAT_COUNT)
		return st_errf(-ST_INVAL, err, errlen, "unknown format %d", (int)spec->format);
	if (spec->replica_count < 0 || (spec->n_replicas && !spec->replicas))
		return st_errf(-ST_INVAL, err, errlen,
			       "replicas: expected a count >= 1 or placements");
	m->name = mem_strdup(spec->name);
	m->path = mem_strdup(spec->path);
	if (!m->name || !m->path)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	m->format = spec->format;
	if ((unsigned)spec->compute_type >= ENG_COMPUTE_COUNT)
		return st_errf(-ST_INVAL, err, errlen, "unknown compute type %d",
			       (int)spec->compute_type);
	m->compute_type = spec->compute_type;
	m->kv_cache_f16 = spec->kv_cache_f16;
	if (spec->max_model_len < 0)
		return st_errf(-ST_INVAL, err, errlen, "max_model_len: expected 0 (the default) or "
			       "a number of tokens, not %d", spec->max_model_len);
	m->max_model_len = (size_t)spec->max_model_len;
	m->live_window_ms = spec->live_window_ms < 0 ? 0 : spec->live_window_ms;
	int rc = m->format == ENG_FORMAT_AUTO ? eng__detect_format(m->path, &m->format, err, errlen) : 0;
	if (rc)
		return rc;
	if (m->format == ENG_FORMAT_GGUF && spec->vad_filter)
		return st_errf(-ST_UNSUPPORTED, err, errlen,
			       "%s: vad_filter applies to Whisper transcription models only",
			       m->path);
	rc = m->format == ENG_FORMAT_GGUF ? load_gguf(m, err, errlen) : load_ct2(m, err, errlen);
	if (!rc && m->task == ENG_TASK_TRANSCRIPTION)
		rc = eng__asr_vad_load(m, spec, err, errlen);
	m->created = (int64_t)time(NULL);
	if (!rc)
		rc = eng__sched_create(m, spec,
				       m->task == ENG_TASK_GENERATION ? &gen_family : &asr_family,
				       &m->sched, err, errlen);
	if (!rc && m->whisper) /* every replica holds its device's weights now */
		eng_whisper_seal(m->whisper);
	return rc;
}

static void model_fini(struct eng_model *m)
{
	eng__sched_destroy(m->sched); /* no replica touches the weights after this */
	m->sched = NULL;
	eng__whisper_model_fini(m);
	eng__asr_vad_fini(m);
	eng__chat_fini(m);
	eng__llm_model_fini(m);
	eng_gguf_close(m->gguf);
	eng_ct2_close(m->ct2);
	mem_free(m->name);
	mem_free(m->path);
	mem_free(m->arch);
}

/* check_name - non-empty and not used by an earlier model. */
static int check_name(const struct eng_model_spec *specs, size_t i, char *err, size_t errlen)
{
	if (!specs[i].name || !specs[i].name[0])
		return st_errf(-ST_INVAL, err, errlen, "model %zu: no name given", i);
	for (size_t k = 0; k < i; k++)
		if (!strcmp(specs[k].name, specs[i].name))
			return st_errf(-ST_INVAL, err, errlen, "model '%s': name used twice",
				       specs[i].name);
	return 0;
}

int eng_create(const struct eng_model_spec *specs, size_t n_specs, struct eng **out,
	       char *err, size_t errlen)
{
	char msg[ENG_ERR_MAX];
	int rc = 0;

	*out = NULL;
	if (dev_cpu_kernels(msg, sizeof(msg)))
		return st_errf(-ST_INVAL, err, errlen, "%s", msg);
	struct eng *eng = mem_calloc(1, sizeof(*eng));
	if (!eng)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	eng->models = mem_calloc(n_specs ? n_specs : 1, sizeof(*eng->models));
	if (!eng->models) {
		rc = st_errf(-ST_NOMEM, err, errlen, "out of memory for %zu models", n_specs);
		goto out_destroy;
	}
	for (; eng->n_models < n_specs; eng->n_models++) {
		if ((rc = check_name(specs, eng->n_models, err, errlen)) != 0)
			goto out_destroy;
		struct eng_model *m = &eng->models[eng->n_models];
		rc = model_load(m, &specs[eng->n_models], msg, sizeof(msg));
		if (rc) {
			eng->n_models++; /* so that eng_destroy frees what it holds */
			st_errf(rc, err, errlen, "model '%s': %s", specs[eng->n_models - 1].name,
				msg);
			goto out_destroy;
		}
	}
	*out = eng;
	return 0;
out_destroy:
	eng_destroy(eng);
	return rc;
}

void eng_destroy(struct eng *eng)
{
	if (!eng)
		return;
	for (size_t i = 0; eng->models && i < eng->n_models; i++)
		model_fini(&eng->models[i]);
	mem_free(eng->models);
	mem_free(eng);
}

/* ---- accessors ---------------------------------------------------------- */

bool eng_is_ready(const struct eng *eng)
{
	return eng != NULL; /* eng_create fails unless every model loaded */
}

size_t eng_model_count(const struct eng *eng) { return eng->n_models; }

const struct eng_model *eng_model_at(const struct eng *eng, size_t i)
{
	return i < eng->n_models ? &eng->models[i] : NULL;
}

const struct eng_model *eng_model_find(const struct eng *eng, const char *name)
{
	for (size_t i = 0; name && i < eng->n_models; i++)
		if (!strcmp(eng->models[i].name, name))
			return &eng->models[i];
	return NULL;
}

const char *eng_model_name(const struct eng_model *m) { return m->name; }
enum eng_task eng_model_task(const struct eng_model *m) { return m->task; }
enum eng_format eng_model_format(const struct eng_model *m) { return m->format; }
bool eng_model_is_ready(const struct eng_model *m) { return m->gguf || m->ct2; }
const char *eng_model_arch(const struct eng_model *m) { return m->arch; }
int64_t eng_model_created(const struct eng_model *m) { return m->created; }
uint64_t eng_model_size_bytes(const struct eng_model *m) { return m->size_bytes; }

const char *eng_model_compute_type(const struct eng_model *m)
{
	return m->whisper ? eng_whisper_compute_type(m->whisper) : NULL;
}

bool eng_model_vad_filter(const struct eng_model *m)
{
	return m->vad_filter;
}

int eng_model_live_window_ms(const struct eng_model *m)
{
	return m->live_window_ms;
}

bool eng_model_has_vad(const struct eng_model *m)
{
	return m->vad != NULL;
}

int eng_model_vad_probs(const struct eng_model *m, const float *samples, size_t n, float *probs)
{
	_Static_assert(ENG_VAD_WINDOW_SAMPLES == ENG_VAD_WINDOW, "one VAD window size");
	if (!m->vad)
		return -ST_UNSUPPORTED;
	return eng_vad_probs(m->vad, samples, n, probs);
}

const char *eng_model_kv_cache(const struct eng_model *m)
{
	if (m->task != ENG_TASK_GENERATION)
		return NULL;
	return m->kv_cache_f16 ? "float16" : "float32";
}

const char *eng_task_str(enum eng_task t)
{
	static const char *const names[ENG_TASK_COUNT] = {
		[ENG_TASK_TRANSCRIPTION] = "transcription",
		[ENG_TASK_GENERATION] = "generation",
	};
	return t >= 0 && t < ENG_TASK_COUNT ? names[t] : "unknown";
}

const char *eng_format_str(enum eng_format f)
{
	static const char *const names[ENG_FORMAT_COUNT] = {
		[ENG_FORMAT_AUTO] = "auto",
		[ENG_FORMAT_GGUF] = "gguf",
		[ENG_FORMAT_CT2] = "ct2",
	};
	return f >= 0 && f < ENG_FORMAT_COUNT ? names[f] : "unknown";
}

void eng_kernels_describe(char *buf, size_t len)
{
	dev_cpu_kernels(buf, len);
}
