//go:build cgo && !piperun_purego

// The uint8 → float32 conversion of FloatLUT.Apply for tables that are an
// affine map of the level, (level / 255 - sub) * mul per channel: to_float
// and a normalize after it. Computing beats looking up here because eight
// lanes convert, divide, subtract and multiply at once, where a table
// lookup goes one element at a time (bench: BenchmarkFloatLUT). Every
// float is bit for bit the table's: the quotient level / 255 is the
// correctly rounded one Go's table builder gets, though not from a divide
// instruction, which held the loop at a third of its speed: level ×
// (1/255) corrected by two fused multiply-adds (q + (level - q·255) ·
// (1/255)) is the correctly rounded quotient for every level from 0 to
// 255; the subtraction and multiplication after it are single IEEE
// operations in the builder's order. TestAffineLUTComputesTheTablesBits
// checks every level.

#include <stdint.h>
#include <stddef.h>
#include "lut_cgo.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

// streamFloats is the shortest row written with streaming stores: 64K
// floats, 256 KiB, so a batch of small images, which may stay in cache
// for the sink, is written the plain way.
#define streamFloats ((size_t)1 << 16)

// affine8 converts the eight levels at p: level / 255 as the reciprocal
// corrected by two fused multiply-adds, then (f - s) * m.
static inline __attribute__((always_inline, target("avx2,fma")))
__m256 affine8(const uint8_t *p, __m256 s, __m256 m) {
	const __m256 d = _mm256_set1_ps(255.0f), r = _mm256_set1_ps(1.0f / 255.0f);
	const __m256 x = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)));
	const __m256 q = _mm256_mul_ps(x, r);
	const __m256 f = _mm256_fmadd_ps(_mm256_fnmadd_ps(q, d, x), r, q);
	return _mm256_mul_ps(_mm256_sub_ps(f, s), m);
}

// affine_avx2 writes with streaming stores where dst is 32-byte aligned
// and the row is at least streamFloats long (the batch stage's rows of
// 224×224×3 floats, 588 KiB, in page-aligned batches): such a batch is
// bound for a sink and outgrows this core's cache anyway, and skipping
// the read of each line before writing it made W1 2 % faster (CPU
// 3.65 against 3.73 s over 10 epochs; 2 epochs +1.2 %), and no slower
// through a serve sink
// to the Python client.
__attribute__((target("avx2,fma")))
static void affine_avx2(const uint8_t *src, float *dst, size_t n, int c, const float *sub, const float *mul) {
	// Lane j of vector k of a 24-element step holds channel (8k + j) mod c.
	__m256 s[3], m[3];
	for (int k = 0; k < 3; k++) {
		float sv[8], mv[8];
		for (int j = 0; j < 8; j++) {
			int ch = (8 * k + j) % c;
			sv[j] = sub[ch];
			mv[j] = mul[ch];
		}
		s[k] = _mm256_loadu_ps(sv);
		m[k] = _mm256_loadu_ps(mv);
	}
	size_t i = 0;
	if (((uintptr_t)dst & 31) == 0 && n >= streamFloats) {
		for (; i + 24 <= n; i += 24)
			for (int k = 0; k < 3; k++)
				_mm256_stream_ps(dst + i + 8 * k, affine8(src + i + 8 * k, s[k], m[k]));
		_mm_sfence();
	}
	for (; i + 24 <= n; i += 24)
		for (int k = 0; k < 3; k++)
			_mm256_storeu_ps(dst + i + 8 * k, affine8(src + i + 8 * k, s[k], m[k]));
	for (; i < n; i++) {
		int ch = (int)(i % (size_t)c);
		float f = (float)src[i] / 255.0f;
		dst[i] = (f - sub[ch]) * mul[ch];
	}
}
#endif

int pr_affine_fast(void) {
#if defined(__x86_64__) && defined(__GNUC__)
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1 : 0;
#else
	return 0;
#endif
}

void pr_affine(const uint8_t *src, float *dst, size_t n, int c, const float *sub, const float *mul) {
#if defined(__x86_64__) && defined(__GNUC__)
	affine_avx2(src, dst, n, c, sub, mul);
#endif
}
