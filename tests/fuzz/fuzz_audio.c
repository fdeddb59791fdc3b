/* fuzz_audio.c - libFuzzer target for the audio decoder (engine/audio/eng_audio.h).
 * Each input is decoded twice: as a container (raw NULL: libavformat's
 * detection over the allowed audio demuxers, then FFmpeg's decoders) and,
 * minus its first byte, as headerless PCM whose encoding, rate and channel
 * count that byte picks.
 * A successful decode must yield finite samples, all touched. The ceiling
 * is 600 s to keep memory per input bounded. Seeds: corpus/audio.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "engine/audio/eng_audio.h"

#define FUZZ_MAX_SECONDS 600.0

static void check(const struct eng_audio *a)
{
	for (size_t i = 0; i < a->n_samples; i++)
		if (!isfinite(a->samples[i]))
			abort();
	if (a->n_samples == 0 || !(a->duration_s > 0.0))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int rates[] = {8000, 16000, 22050, 48000};
	char err[256];
	struct eng_audio a;

	if (eng_audio_decode_max(data, size, NULL, FUZZ_MAX_SECONDS, &a, err, sizeof(err)) == 0)
		check(&a);
	eng_audio_fini(&a);
	if (size < 1)
		return 0;
	struct eng_audio_raw raw = {
		.encoding = (enum eng_audio_encoding)(data[0] % (ENG_AUDIO_ENCODING_COUNT + 1)),
		.sample_rate = rates[(data[0] >> 3) & 3],
		.channels = 1 + (data[0] >> 5), /* 1..8 */
	};
	if (eng_audio_decode_max(data + 1, size - 1, &raw, FUZZ_MAX_SECONDS, &a, err,
				 sizeof(err)) == 0)
		check(&a);
	eng_audio_fini(&a);
	return 0;
}
