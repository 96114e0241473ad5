// Shared libjpeg glue for decode_libjpeg.go and decode_window.go. It uses
// only jpeglib.h (libjpeg-turbo's libjpeg API plus its JCS_EXT_* and crop
// extensions), so linking needs libjpeg.so alone, which the base image
// ships, and not libturbojpeg.

#ifndef PIPERUN_JPEG_CGO_H
#define PIPERUN_JPEG_CGO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <jpeglib.h>

// pr_dec is a reusable decompressor: a jpeg_decompress_struct with its
// error and progress managers. It lives in C memory because libjpeg keeps
// pointers into it between calls.
typedef struct pr_dec pr_dec;

pr_dec *pr_dec_new(void);
void pr_dec_free(pr_dec *d);

// pr_dec_msg is the message of the last failed call: libjpeg's own text for
// the error or, in strict mode, the first warning.
const char *pr_dec_msg(pr_dec *d);

int pr_decode(pr_dec *d, const unsigned char *buf, unsigned long size, int num,
	int color, int comps, int width, int height, unsigned char *out, int strict);

int pr_decode_hpass3(pr_dec *d, const unsigned char *buf, unsigned long size, int num,
	int width, int height, unsigned char *strip, unsigned char *out, int ow,
	const int32_t *start, const int32_t *count, const uint64_t *w13, int stride,
	const int16_t *w16, int groups, uint64_t *exp, int strict);

int pr_decode_window(pr_dec *d, const unsigned char *buf, unsigned long size, int num,
	int color, int comps, int width, int height, int y, int x, int h, int w,
	unsigned char *out, unsigned char *rowbuf, int strict);

#endif
