package plan

import "math"

// mulSat is a*b for sizes (a, b ≥ 0), saturated at math.MaxInt64: a
// buffer of 2^63-1 samples wrapped around to a share that fit, and the
// run panicked making its queue.
func mulSat(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return a * b
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// addSat is a+b for sizes (a, b ≥ 0), saturated at math.MaxInt64.
func addSat(a, b int64) int64 {
	if a > 0 && b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}
