/* srv_demo.c - GET / and GET /demo: the live transcription page. The page
 * is server/demo/demo.html, embedded at build time (scripts/embed-file)
 * as srv_demo_page; it uses only what the daemon serves: Deepgram's live
 * WebSocket (/v1/listen) and the model lists (/v1/models, /v2/models/{m}). */
#include <stddef.h>

#include "server/demo/srv_demo.h"

extern const char srv_demo_page[];
extern const size_t srv_demo_page_len;

/* Inline script and style (the page is one file), an AudioWorklet loaded
 * from a blob: URL, and connections to this origin only ('self' covers
 * ws: and wss: on the same host in CSP Level 3). */
#define SRV_DEMO_CSP "default-src 'none'; script-src 'unsafe-inline' blob:; " \
	"style-src 'unsafe-inline'; connect-src 'self'; media-src 'self' blob: mediastream:; " \
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

void srv__h_demo(struct srv_req *req)
{
	if (srv__req_add_header(req, "Content-Security-Policy", SRV_DEMO_CSP) ||
	    srv__req_add_header(req, "X-Content-Type-Options", "nosniff") ||
	    srv__req_add_header(req, "Cache-Control", "no-cache")) {
		srv__req_respond_error(req, 503, "server_error", "could not build the response");
		return;
	}
	srv__req_respond(req, 200, "text/html; charset=utf-8", srv_demo_page, srv_demo_page_len);
}
