//go:build cgo && !piperun_purego

// The passes of the uint8 resize, in C so that they run vectorized. The
// 22-bit vertical pass (pr_vpass8) is an elementwise loop that GCC turns
// into 8-lane AVX2 (or 4-lane SSE2) code; the 13-bit vertical pass and the
// packed RGB horizontal pass are written with AVX2 intrinsics. Each
// computes exactly what its Go loop in resize.go does.

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

// hpass3_swar is hpass8's packed three-channel pass (hrow3packed in
// resize.go) over h rows: each pixel's channels sit in 21-bit lanes of one
// uint64, so one multiply by a 13-bit weight serves all three. exp holds
// iw uint64s of scratch.
PR_CLONES
static void hpass3_swar(const uint8_t *src, int h, int iw, uint8_t *dst, int ow,
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

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <string.h>
#define PR_HAVE_AVX2_PASS 1

// hpass3_avx2 computes exactly what hpass3_swar does, the same 13-bit
// weights summed in exact integers, four taps per multiply-add: one
// 16-byte load holds four RGB pixels, a byte shuffle spreads them into
// 16-bit lanes as (R0 R1 G0 G1 B0 B1 0 0 | R2 R3 G2 G3 B2 B3 0 0), and
// vpmaddwd against the taps' weights laid out alike (w16: per output
// pixel, groups of 16 int16s, four taps each, zero past count) leaves the
// three channel sums in 32-bit lanes. A channel sum is at most
// 255 × (2^13 + 1) + 2^12, far from overflowing. Every output reads all
// its groups, the zero-weight taps too, so the loop has no branch on
// count; it reads at most 16 bytes from pixel start[x] + 4 * (groups - 1).
static inline __attribute__((always_inline, target("avx2")))
__m128i hpass3_pixel(const uint8_t *p, const __m256i *w, int groups, __m256i spread) {
	__m256i acc = _mm256_madd_epi16(_mm256_shuffle_epi8(
		_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p)), spread), _mm256_loadu_si256(w));
	for (int g = 1; g < groups; g++) {
		__m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(p + 12 * g)));
		acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_shuffle_epi8(v, spread), _mm256_loadu_si256(w + g)));
	}
	return _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
}

__attribute__((target("avx2")))
static void hpass3_avx2(const uint8_t *src, int h, int iw, uint8_t *dst, int ow,
		const int32_t *start, const int16_t *w16, int groups) {
	const __m256i spread = _mm256_setr_epi8(
		0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,
		6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1);
	const __m128i round = _mm_set1_epi32(1 << (PR_SWAR - 1));
	const size_t size = (size_t)h * iw * 3;
	for (int y = 0; y < h; y++) {
		const size_t row = (size_t)y * iw * 3;
		uint8_t *d = dst + (size_t)y * ow * 3;
		for (int x = 0; x < ow; x++) {
			const size_t at = row + (size_t)start[x] * 3;
			const __m256i *w = (const __m256i *)(w16 + (size_t)x * groups * 16);
			__m128i sum;
			if (at + 12 * (size_t)groups + 4 <= size) {
				sum = groups == 2 ? hpass3_pixel(src + at, w, 2, spread) : hpass3_pixel(src + at, w, groups, spread);
			} else {
				// The last pixels of the image: copy what is left, so the
				// zero-weight taps past it read zeros, not past the end.
				uint8_t tail[16];
				__m256i acc = _mm256_setzero_si256();
				for (int g = 0; g < groups; g++) {
					size_t off = at + 12 * (size_t)g;
					size_t left = off < size ? size - off : 0;
					memset(tail, 0, 16);
					if (left > 0)
						memcpy(tail, src + off, left < 12 ? left : 12);
					acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_shuffle_epi8(
						_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)tail)), spread),
						_mm256_loadu_si256(w + g)));
				}
				sum = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
			}
			sum = _mm_srli_epi32(_mm_add_epi32(sum, round), PR_SWAR);
			sum = _mm_packus_epi16(_mm_packus_epi32(sum, sum), sum);
			uint32_t rgb = (uint32_t)_mm_cvtsi128_si32(sum);
			if (x + 1 < ow) {
				memcpy(d + 3 * x, &rgb, 4); // the fourth byte is the next pixel's, written next
			} else {
				d[3 * x] = (uint8_t)rgb;
				d[3 * x + 1] = (uint8_t)(rgb >> 8);
				d[3 * x + 2] = (uint8_t)(rgb >> 16);
			}
		}
	}
}
#endif

// vpass13_scalar is vpass13 of resize.go, for CPUs without AVX2.
PR_CLONES
static void vpass13_scalar(const uint8_t *src, int row, uint8_t *dst, int oh,
		const int32_t *start, const int32_t *count, const uint64_t *w13, int stride,
		int32_t *restrict acc) {
	for (int y = 0; y < oh; y++) {
		const uint64_t *ws = w13 + (size_t)y * stride;
		const uint8_t *r0 = src + (size_t)start[y] * row;
		int32_t w0 = (int32_t)ws[0];
		for (int i = 0; i < row; i++)
			acc[i] = (1 << (PR_SWAR - 1)) + (int32_t)r0[i] * w0;
		for (int k = 1; k < count[y]; k++) {
			const uint8_t *rk = src + (size_t)(start[y] + k) * row;
			int32_t w = (int32_t)ws[k];
			for (int i = 0; i < row; i++)
				acc[i] += (int32_t)rk[i] * w;
		}
		uint8_t *d = dst + (size_t)y * row;
		for (int i = 0; i < row; i++)
			d[i] = (uint8_t)(acc[i] >> PR_SWAR);
	}
}

#ifdef PR_HAVE_AVX2_PASS
// vpass13_avx2 computes exactly what vpass13_scalar does, 32 bytes of an
// output row at a time with the sums in registers: input rows k and k+1
// are interleaved byte by byte and widened to 16-bit pairs, and vpmaddwd
// against (w_k, w_k+1) adds r_k·w_k + r_k+1·w_k+1 to each 32-bit lane, two
// taps per instruction where vpass8 spends a 32-bit multiply per tap. The
// unpacks and the final packs both work within 128-bit halves, so the
// bytes come back in order. A lane peaks at 255 × 2^13 + 2^12.
__attribute__((target("avx2")))
static void vpass13_avx2(const uint8_t *src, int row, uint8_t *dst, int oh,
		const int32_t *start, const int32_t *count, const uint64_t *w13, int stride) {
	const __m256i zero = _mm256_setzero_si256();
	const __m256i round = _mm256_set1_epi32(1 << (PR_SWAR - 1));
	for (int y = 0; y < oh; y++) {
		const uint64_t *ws = w13 + (size_t)y * stride;
		const uint8_t *base = src + (size_t)start[y] * row;
		const int n = count[y];
		uint8_t *d = dst + (size_t)y * row;
		int i = 0;
		for (; i + 32 <= row; i += 32) {
			__m256i a0 = round, a1 = round, a2 = round, a3 = round;
			for (int k = 0; k < n; k += 2) {
				__m256i ra = _mm256_loadu_si256((const __m256i *)(base + (size_t)k * row + i));
				__m256i rb = zero;
				uint32_t pair = (uint32_t)ws[k];
				if (k + 1 < n) {
					rb = _mm256_loadu_si256((const __m256i *)(base + (size_t)(k + 1) * row + i));
					pair |= (uint32_t)ws[k + 1] << 16;
				}
				const __m256i w = _mm256_set1_epi32((int32_t)pair);
				const __m256i lo = _mm256_unpacklo_epi8(ra, rb), hi = _mm256_unpackhi_epi8(ra, rb);
				a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_unpacklo_epi8(lo, zero), w));
				a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_unpackhi_epi8(lo, zero), w));
				a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_unpacklo_epi8(hi, zero), w));
				a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_unpackhi_epi8(hi, zero), w));
			}
			a0 = _mm256_srai_epi32(a0, PR_SWAR);
			a1 = _mm256_srai_epi32(a1, PR_SWAR);
			a2 = _mm256_srai_epi32(a2, PR_SWAR);
			a3 = _mm256_srai_epi32(a3, PR_SWAR);
			_mm256_storeu_si256((__m256i *)(d + i),
				_mm256_packus_epi16(_mm256_packs_epi32(a0, a1), _mm256_packs_epi32(a2, a3)));
		}
		for (; i < row; i++) {
			int32_t acc = 1 << (PR_SWAR - 1);
			for (int k = 0; k < n; k++)
				acc += (int32_t)base[(size_t)k * row + i] * (int32_t)ws[k];
			d[i] = (uint8_t)(acc >> PR_SWAR);
		}
	}
}
#endif

// pr_vpass13 runs vpass13_avx2 where the CPU has AVX2, vpass13_scalar
// otherwise.
void pr_vpass13(const uint8_t *src, int row, uint8_t *dst, int oh,
		const int32_t *start, const int32_t *count, const uint64_t *w13, int stride,
		int32_t *acc) {
#ifdef PR_HAVE_AVX2_PASS
	if (__builtin_cpu_supports("avx2")) {
		vpass13_avx2(src, row, dst, oh, start, count, w13, stride);
		return;
	}
#endif
	vpass13_scalar(src, row, dst, oh, start, count, w13, stride, acc);
}

// pr_hpass3_avx2 says whether pr_hpass3packed runs the AVX2 loop when
// given w16.
int pr_hpass3_avx2(void) {
#ifdef PR_HAVE_AVX2_PASS
	return __builtin_cpu_supports("avx2") ? 1 : 0;
#else
	return 0;
#endif
}

// pr_hpass3packed runs hpass3_avx2 where the CPU has AVX2 and the caller
// laid out w16, hpass3_swar otherwise (exp may then be NULL).
void pr_hpass3packed(const uint8_t *src, int h, int iw, uint8_t *dst, int ow,
		const int32_t *start, const int32_t *count, const uint64_t *w13, int stride,
		const int16_t *w16, int groups, uint64_t *exp) {
#ifdef PR_HAVE_AVX2_PASS
	if (w16 && __builtin_cpu_supports("avx2")) {
		hpass3_avx2(src, h, iw, dst, ow, start, w16, groups);
		return;
	}
#endif
	hpass3_swar(src, h, iw, dst, ow, start, count, w13, stride, exp);
}
