#include <stdint.h>
#include <stddef.h>

int pr_affine_fast(void);
void pr_affine(const uint8_t *src, float *dst, size_t n, int c, const float *sub, const float *mul);
