#ifndef PIPERUN_RESIZE_CGO_H
#define PIPERUN_RESIZE_CGO_H

#include <stdint.h>

// pr_vpass8 is vpass8 of resize.go: dst (oh rows of row bytes) from src,
// each output row y the sum over k < count[y] of input row start[y]+k
// times wi[y*stride+k], in 22-bit fixed point; acc holds row int32s.
void pr_vpass8(const uint8_t *src, int row, uint8_t *dst, int oh,
	const int32_t *start, const int32_t *count, const int32_t *wi, int stride,
	int32_t *acc);

#endif
