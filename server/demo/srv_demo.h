/* srv_demo.h - the live transcription page (server/demo/demo.html, in the
 * binary): GET / and GET /demo. */
#ifndef SRV_DEMO_H
#define SRV_DEMO_H

#include "server/srv_int.h"

/* srv__h_demo - answer with the page: 200, text/html, a Content-Security-
 * Policy that lets it reach only this server (its WebSocket and REST
 * routes). No key needed: the page asks for one and sends it itself.
 * Loop thread. */
void srv__h_demo(struct srv_req *req);

#endif /* SRV_DEMO_H */
