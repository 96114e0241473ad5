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

#define PR_SWAR 13
#define PR_LANE 21

// pr_hpass3packed is hpass8's packed three-channel pass (hrow3packed in
// resize.go) over h rows: each pixel's channels sit in 21-bit lanes of one
// uint64, so one multiply by a 13-bit weight serves all three. exp holds
// iw uint64s of scratch.
PR_CLONES
void pr_hpass3packed(const uint8_t *src, int h, int iw, uint8_t *dst, int ow,
		const int32_t *start, const int32_t *count, const uint64_t *w13, int stride,
		uint64_t *restrict exp) {
	const uint64_t round = (1ull << (PR_SWAR - 1)) | (1ull << (PR_SWAR - 1 + PR_LANE)) |
		(1ull << (PR_SWAR - 1 + 2 * PR_LANE));
	for (int y = 0; y < h; y++) {
		const uint8_t *s = src + (size_t)y * iw * 3;
		uint8_t *d = dst + (size_t)y * ow * 3;
		for (int i = 0; i < iw; i++)
			exp[i] = (uint64_t)s[3 * i] | (uint64_t)s[3 * i + 1] << PR_LANE |
				(uint64_t)s[3 * i + 2] << (2 * PR_LANE);
		for (int x = 0; x < ow; x++) {
			const uint64_t *e = exp + start[x];
			const uint64_t *w = w13 + (size_t)x * stride;
			int n = count[x];
			uint64_t acc = round;
			for (int k = 0; k < n; k++)
				acc += e[k] * w[k];
			d[3 * x] = (uint8_t)(acc >> PR_SWAR);
			d[3 * x + 1] = (uint8_t)(acc >> (PR_SWAR + PR_LANE));
			d[3 * x + 2] = (uint8_t)(acc >> (PR_SWAR + 2 * PR_LANE));
		}
	}
}
