#ifndef PIPERUN_RESIZE_CGO_H
#define PIPERUN_RESIZE_CGO_H

#include <stdint.h>

// pr_vpass8 is vpass8 of resize.go: dst (oh rows of row bytes) from src,
// each output row y the sum over k < count[y] of input row start[y]+k
// times wi[y*stride+k], in 22-bit fixed point; acc holds row int32s.
void pr_vpass8(const uint8_t *src, int row, uint8_t *dst, int oh,
	const int32_t *start, const int32_t *count, const int32_t *wi, int stride,
	int32_t *acc);

// pr_vpass13 is vpass13 of resize.go: pr_vpass8 with the 13-bit weights
// w13 (non-negative, summing to 2^13 per output row); acc holds row
// int32s for the loop that runs where the CPU lacks AVX2 (pr_hpass3_avx2
// is 0), and may be NULL otherwise.
void pr_vpass13(const uint8_t *src, int row, uint8_t *dst, int oh,
	const int32_t *start, const int32_t *count, const uint64_t *w13, int stride,
	int32_t *acc);

// pr_hpass3_avx2 is 1 where pr_hpass3packed has an AVX2 loop and the CPU
// runs it.
int pr_hpass3_avx2(void);

// pr_hpass3packed is hpass8's packed RGB pass over h rows of iw pixels
// into ow pixels, with 13-bit weights w13, or the same weights laid out
// for AVX2 in w16 (groups of 16 int16s per output; NULL if not made);
// exp holds iw uint64s, unless the AVX2 loop runs (w16 given and
// pr_hpass3_avx2), when it may be NULL.
void pr_hpass3packed(const uint8_t *src, int h, int iw, uint8_t *dst, int ow,
	const int32_t *start, const int32_t *count, const uint64_t *w13, int stride,
	const int16_t *w16, int groups, uint64_t *exp);

#endif
