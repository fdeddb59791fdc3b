/* srv_openai_audio.h - OpenAI's POST /v1/audio/transcriptions
 * (srv_openai_audio.c). Internal to server/.
 */
#ifndef SRV_OPENAI_AUDIO_H
#define SRV_OPENAI_AUDIO_H

#include "server/srv_int.h"

/* srv__h_openai_transcriptions - the route's handler: answers req now
 * (a bad request) or when its transcription job ends. Loop thread. */
void srv__h_openai_transcriptions(struct srv_req *req);

#endif /* SRV_OPENAI_AUDIO_H */
