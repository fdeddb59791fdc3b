/* srv_openai_audio.h - OpenAI's POST /v1/audio/transcriptions and
 * /v1/audio/translations (srv_openai_audio.c). Internal to server/.
 */
#ifndef SRV_OPENAI_AUDIO_H
#define SRV_OPENAI_AUDIO_H

#include "server/srv_int.h"

/* srv__h_openai_transcriptions - the route's handler: answers req now
 * (a bad request) or when its transcription job ends. Loop thread. */
void srv__h_openai_transcriptions(struct srv_req *req);

/* srv__h_openai_translations - the same with Whisper's task=translate
 * (English text; a 400 on an English-only model). Loop thread. */
void srv__h_openai_translations(struct srv_req *req);

#endif /* SRV_OPENAI_AUDIO_H */
