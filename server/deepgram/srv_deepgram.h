/* srv_deepgram.h - Deepgram's POST /v1/listen (srv_deepgram.c). Internal
 * to server/.
 */
#ifndef SRV_DEEPGRAM_H
#define SRV_DEEPGRAM_H

#include "server/srv_int.h"

/* srv__h_deepgram_listen - the route's handler: answers req now (a bad
 * request) or when its transcription job ends. Loop thread. */
void srv__h_deepgram_listen(struct srv_req *req);

/* srv__h_deepgram_live - GET /v1/listen, the live API (srv_dg_live.c):
 * refuses a bad handshake with a 4xx, or answers 101 and serves the
 * WebSocket until it closes. Loop thread. */
void srv__h_deepgram_live(struct srv_req *req);

#endif /* SRV_DEEPGRAM_H */
