/* srv_sha256.c - SHA-256 (FIPS 180-4) for the "sha256" of Deepgram's
 * response metadata: the hex digest of the submitted audio bytes. Written
 * from the standard's description; a plain, unrolled-nowhere loop (the
 * hash runs on the worker beside a transcription that costs far more).
 */
#include <stdint.h>
#include <string.h>

#include "server/job/srv_audio_job.h"

static const uint32_t srv_sha256_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
	0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
	0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
	0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
	0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
	0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
	0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
	0xc67178f2,
};

static uint32_t srv_rotr(uint32_t x, int n)
{
	return (x >> n) | (x << (32 - n));
}

/* Compress one 64-byte block into h[8]. */
static void srv_sha256_block(uint32_t h[8], const unsigned char *b)
{
	uint32_t w[64], v[8];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
		       (uint32_t)b[4 * i + 2] << 8 | (uint32_t)b[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = srv_rotr(w[i - 15], 7) ^ srv_rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = srv_rotr(w[i - 2], 17) ^ srv_rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	memcpy(v, h, sizeof(v));
	for (int i = 0; i < 64; i++) {
		uint32_t s1 = srv_rotr(v[4], 6) ^ srv_rotr(v[4], 11) ^ srv_rotr(v[4], 25);
		uint32_t t1 = v[7] + s1 + ((v[4] & v[5]) ^ (~v[4] & v[6])) + srv_sha256_k[i] + w[i];
		uint32_t s0 = srv_rotr(v[0], 2) ^ srv_rotr(v[0], 13) ^ srv_rotr(v[0], 22);
		uint32_t t2 = s0 + ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
		memmove(v + 1, v, 7 * sizeof(v[0]));
		v[4] += t1;
		v[0] = t1 + t2;
	}
	for (int i = 0; i < 8; i++)
		h[i] += v[i];
}

void srv__sha256(const void *data, size_t len, unsigned char out[32])
{
	uint32_t h[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
			  0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
	const unsigned char *p = data;
	size_t n = len;
	for (; n >= 64; n -= 64, p += 64)
		srv_sha256_block(h, p);
	/* The tail, a 0x80 byte, zeros and the bit length (big-endian). */
	unsigned char tail[128] = { 0 };
	if (n)
		memcpy(tail, p, n);
	tail[n] = 0x80;
	size_t tlen = n < 56 ? 64 : 128;
	uint64_t bits = (uint64_t)len * 8;
	for (int i = 0; i < 8; i++)
		tail[tlen - 1 - i] = (unsigned char)(bits >> (8 * i));
	for (size_t off = 0; off < tlen; off += 64)
		srv_sha256_block(h, tail + off);
	for (int i = 0; i < 8; i++)
		for (int k = 0; k < 4; k++)
			out[4 * i + k] = (unsigned char)(h[i] >> (24 - 8 * k));
}
