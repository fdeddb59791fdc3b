/* srv_deepgram.h - Deepgram's POST /v1/listen (srv_deepgram.c). Internal
 * to server/.
 */
#ifndef SRV_DEEPGRAM_H
#define SRV_DEEPGRAM_H

#include "server/srv_int.h"

/* srv__h_deepgram_listen - the route's handler: answers req now (a bad
 * request) or when its transcription job ends. Loop thread. */
void srv__h_deepgram_listen(struct srv_req *req);

#endif /* SRV_DEEPGRAM_H */
