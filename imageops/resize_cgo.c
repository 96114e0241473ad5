//go:build cgo && !piperun_purego

// The vertical pass of the uint8 resize, in C so that the compiler can
// vectorize it: each output row is a weighted sum of whole input rows, an
// elementwise loop that GCC turns into 8-lane AVX2 (or 4-lane SSE2) code.
// It computes exactly what vpass8 in resize.go does.

#include <stdint.h>
#include <stddef.h>
#include "resize_cgo.h"

#define PR_PRECISION 22
#define PR_HALF (1 << (PR_PRECISION - 1))

// Clones for AVX2 and the x86-64 baseline, picked once at load time; on
// other architectures the attribute is left out.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define PR_CLONES
#endif

PR_CLONES
void pr_vpass8(const uint8_t *src, int row, uint8_t *dst, int oh,
		const int32_t *start, const int32_t *count, const int32_t *wi, int stride,
		int32_t *restrict acc) {
	for (int y = 0; y < oh; y++) {
		const int32_t *ws = wi + (size_t)y * stride;
		const uint8_t *r0 = src + (size_t)start[y] * row;
		int32_t w0 = ws[0];
		for (int i = 0; i < row; i++)
			acc[i] = PR_HALF + (int32_t)r0[i] * w0;
		for (int k = 1; k < count[y]; k++) {
			const uint8_t *rk = src + (size_t)(start[y] + k) * row;
			int32_t w = ws[k];
			for (int i = 0; i < row; i++)
				acc[i] += (int32_t)rk[i] * w;
		}
		uint8_t *d = dst + (size_t)y * row;
		for (int i = 0; i < row; i++) {
			int32_t v = acc[i] >> PR_PRECISION;
			d[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
		}
	}
}
