// Package didyoumean picks the known name a misspelt one most likely meant,
// for the "did you mean" of spec and expression errors alike.
package didyoumean

import "strings"

// Closest returns the name among names that got spells in another case,
// else the first one within two edits of got (the nearest wins), or "".
// Case comes first because "MAP" is three edits from "map" but plainly
// meant it.
func Closest(got string, names []string) string {
	for _, n := range names {
		if strings.EqualFold(got, n) {
			return n
		}
	}
	best, bestD := "", 3
	for _, n := range names {
		if d := Distance(got, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// Distance is the Levenshtein distance between a and b, in bytes.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
