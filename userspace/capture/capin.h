/* capin.h - capture file stage: the bytes under the capture reader.
 *
 * Three layers, each streaming with bounded memory: the file or memory
 * buffer; a whole-file zstd stream (a capture kept as FILE.tbpf.zst), found
 * by the zstd frame magic at byte 0; and the blocks of capture version 2
 * (block.h), switched on by the reader once it has read a version-2 file
 * header.  Errors name the byte offset where they are: in the file, or in
 * the decompressed stream of a .zst.
 */
#ifndef TBPF_CAPIN_H
#define TBPF_CAPIN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct capture_in;

/* Over an open file (not closed by capin_free) or a buffer that outlives
 * it.  NULL when out of memory. */
struct capture_in *capin_file(FILE *f);
struct capture_in *capin_mem(const void *buf, size_t len);
/* Back to byte 0 of the capture (the decompressed one's for a .zst), blocks
 * off.  0, or -1 with the error set. */
int capin_start(struct capture_in *in);
/* From here on the stream is blocks; bytes read are their records. */
int capin_blocks(struct capture_in *in);
/* Up to n bytes: fewer only at the end or on an error.  -1 on an error
 * before any byte (then capin_error says what, and where). */
ssize_t capin_read(struct capture_in *in, void *buf, size_t n);
/* What went wrong (NULL if nothing) and *at the byte offset it names. */
const char *capin_error(const struct capture_in *in, uint64_t *at);
void capin_free(struct capture_in *in);

#endif
