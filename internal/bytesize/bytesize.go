// Package bytesize writes byte counts as specs, plans and errors print
// them. It is a leaf so that spec can say sizes without importing the
// runtime's memory budget.
package bytesize

import (
	"math"
	"strconv"
)

// Format writes n bytes with the largest binary unit that keeps it short
// ("1.5MiB", "980B").
func Format(n int64) string { return format(n, math.Round) }

// FormatAtLeast is Format rounded up, for a size that must not come out
// smaller than n: a budget advised as "at least" one printed rounded down
// would not fit.
func FormatAtLeast(n int64) string { return format(n, math.Ceil) }

func format(n int64, round func(float64) float64) string {
	v := float64(n)
	for _, u := range []struct {
		s string
		m float64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v >= u.m {
			return strconv.FormatFloat(round(v/u.m*100)/100, 'f', -1, 64) + u.s
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}
