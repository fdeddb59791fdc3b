/* eng_bpe_int.h - internals shared by the BPE tokenizer's files
 * (eng_bpe.c: tables, merges, encode/decode; eng_bpe_pretok.c: the
 * pre-tokenizers; eng_bpe_hf.c: the tokenizer.json reader). Not for use
 * outside engine/tok/eng_bpe*.c.
 */
#ifndef ENG_BPE_INT_H
#define ENG_BPE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "engine/tok/eng_bpe.h"

/* eng__bpe_pretok_next - length in bytes (>= 1) of the pre-token starting
 * at text[pos], pos < len. The split is stateless: the next word starts
 * where this one ends, as a regex scanned leftmost-first would give. Never
 * reads outside text[0, len). Invalid UTF-8 bytes count as one-byte
 * "other" characters (see eng_bpe.h). */
size_t eng__bpe_pretok_next(enum eng_bpe_pretok kind, const uint8_t *text, size_t len, size_t pos);

#endif /* ENG_BPE_INT_H */
