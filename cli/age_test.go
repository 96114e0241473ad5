package cli

import (
	"testing"
	"time"
)

func TestAgeSet(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"7d", 7 * 24 * time.Hour, true},
		{"0.5d", 12 * time.Hour, true},
		{"36h", 36 * time.Hour, true},
		{"90m", 90 * time.Minute, true},
		{"0s", 0, true},
		{"-1d", -24 * time.Hour, true}, // rejected by prune as negative
		{"d", 0, false},
		{"1w", 0, false},
		{"1e9d", 0, false},
		{"NaNd", 0, false},
		{"1_0d", 0, false},
	} {
		var a age
		err := a.Set(tc.in)
		if (err == nil) != tc.ok || tc.ok && time.Duration(a) != tc.want {
			t.Errorf("Set(%q) = %v, %v; want %v, ok %v", tc.in, time.Duration(a), err, tc.want, tc.ok)
		}
	}
}

// FuzzAgeSet: any input is a days value, a Go duration or an error, never
// a panic; what it accepts without "d" is exactly what ParseDuration does.
func FuzzAgeSet(f *testing.F) {
	for _, s := range []string{"7d", "0.5d", "36h", "", "d", "1e9d", "-0d", "1h30m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var a age
		err := a.Set(s)
		if len(s) > 0 && s[len(s)-1] == 'd' {
			return
		}
		d, perr := time.ParseDuration(s)
		if (err == nil) != (perr == nil) || err == nil && time.Duration(a) != d {
			t.Errorf("Set(%q) = %v, %v; ParseDuration %v, %v", s, time.Duration(a), err, d, perr)
		}
	})
}
