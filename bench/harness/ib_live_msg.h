/* ib_live_msg.h - the pure parts of inferd-bench's deepgram-live client
 * (no loop, no sockets), a library of their own so that a unit test links
 * them alone (tests/unit/bench/test_ib_live.c): the WebSocket opening
 * handshake's key and accept values (RFC 6455 4.1, 4.2.2), one server
 * message of Deepgram's live API read into what the harness measures, and
 * the two latencies computed from it (docs/bench.md "Live streams").
 *
 * Times are seconds: of stream audio (a message's start, duration and word
 * ends, counted from the stream's first sample) or of the run's clock.
 */
#ifndef IB_LIVE_MSG_H
#define IB_LIVE_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IB_WS_KEY_LEN	 24 /* base64 of 16 bytes */
#define IB_WS_ACCEPT_LEN 28 /* base64 of a SHA-1 digest (20 bytes) */

/* ib_ws_key - the Sec-WebSocket-Key for the 16 random bytes nonce:
 * their base64, IB_WS_KEY_LEN characters and a NUL into out. */
void ib_ws_key(const uint8_t nonce[16], char out[IB_WS_KEY_LEN + 1]);

/* ib_ws_accept - the Sec-WebSocket-Accept a server answers key (a
 * NUL-terminated Sec-WebSocket-Key) with: base64(SHA-1(key + the RFC's
 * GUID)), IB_WS_ACCEPT_LEN characters and a NUL into out. */
void ib_ws_accept(const char *key, char out[IB_WS_ACCEPT_LEN + 1]);

/* ib_ws_accept_is_valid - whether the header value v (n bytes, not
 * NUL-terminated; spaces and tabs around it allowed) is key's accept. */
bool ib_ws_accept_is_valid(const char *key, const char *v, size_t n);

enum ib_live_msg_type {
	IB_LIVE_MSG_OTHER = 0, /* a "type" the harness does not measure */
	IB_LIVE_MSG_RESULTS,
	IB_LIVE_MSG_METADATA,
};

/* One server message as the harness reads it. */
struct ib_live_msg {
	enum ib_live_msg_type type;
	bool is_final;	  /* Results: a final (is_final: true), else an interim */
	double start;	  /* Results: s of stream audio where it begins */
	double duration;  /* Results: s of audio it covers */
	long n_words;	  /* Results: words of its first alternative */
	double last_end;  /* Results: its last word's end (s), -1 without words */
	char *transcript; /* Results: the first alternative's transcript (new,
			   * "" otherwise); ib_live_msg_fini frees it */
};

/* ib_live_msg_parse - the text message s[n] into *m (zeroed first). A
 * Results message must have a boolean is_final, numbers start and
 * duration, and channel.alternatives[0] with a string transcript and an
 * array of words, each an object with a number end. Returns 0, or -1
 * when s is not a JSON object with a string "type", is a Results without
 * what it must have, or memory ran out (*m then holds nothing to free). */
int ib_live_msg_parse(const char *s, size_t n, struct ib_live_msg *m);

/* ib_live_msg_fini - free what m holds (m itself is the caller's); a
 * zeroed or finished m is a no-op. */
void ib_live_msg_fini(struct ib_live_msg *m);

/* ib_live_final_latency - a final's latency: its arrival t_arr minus the
 * time the audio at end_s (its last word's end) was sent. t_frame[k]
 * (run seconds) is when frame k, audio [k * frame_s, (k + 1) * frame_s),
 * went out; n_sent >= 1 frames have. The frame holding the audio just
 * before end_s is the one; an end past the audio sent takes the last
 * frame sent, an end at or before 0 the first. */
double ib_live_final_latency(double t_arr, const double *t_frame, size_t n_sent, double frame_s,
			     double end_s);

/* ib_live_interim_latency - Deepgram's interim latency: the seconds of
 * audio sent when the interim m arrived (sent_s) minus where it ends
 * (start + duration). */
double ib_live_interim_latency(double sent_s, const struct ib_live_msg *m);

#endif /* IB_LIVE_MSG_H */
