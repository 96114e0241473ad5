//go:build cgo && !piperun_purego

// The uint8 → float32 conversion of FloatLUT.Apply for tables that are an
// affine map of the level, (level / 255 - sub) * mul per channel: to_float
// and a normalize after it. Computing beats looking up here because eight
// lanes convert, divide, subtract and multiply at once, where a table
// lookup goes one element at a time (bench: BenchmarkFloatLUT). The steps
// are IEEE single-precision operations in the order Go's table builder
// does them, each correctly rounded, so every float is bit for bit the
// table's. The division is not a divide instruction, which held the loop
// at a third of its speed: level × (1/255) corrected by two fused
// multiply-adds (q + (level - q·255)·(1/255)) is the correctly rounded
// quotient for every level from 0 to 255, as
// TestAffineLUTComputesTheTablesBits checks.

#include <stdint.h>
#include <stddef.h>
#include "lut_cgo.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

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
	const __m256 d = _mm256_set1_ps(255.0f), r = _mm256_set1_ps(1.0f / 255.0f);
	size_t i = 0;
	for (; i + 24 <= n; i += 24) {
		for (int k = 0; k < 3; k++) {
			__m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(src + i + 8 * k)));
			const __m256 x = _mm256_cvtepi32_ps(v);
			const __m256 q = _mm256_mul_ps(x, r);
			const __m256 f = _mm256_fmadd_ps(_mm256_fnmadd_ps(q, d, x), r, q);
			_mm256_storeu_ps(dst + i + 8 * k, _mm256_mul_ps(_mm256_sub_ps(f, s[k]), m[k]));
		}
	}
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
