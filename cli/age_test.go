package cli

import (
	"testing"
	"time"
)

func TestAgeSet(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"7d", 7 * 24 * time.Hour, ""},
		{"0.5d", 12 * time.Hour, ""},
		{"36h", 36 * time.Hour, ""},
		{"90m", 90 * time.Minute, ""},
		{"0s", 0, ""},
		{"-1d", -24 * time.Hour, ""}, // rejected by prune as negative
		{"d", 0, `want a number of days up to 100000 (7d) or a duration (36h), got "d"`},
		{"1w", 0, `want a number of days (7d) or a duration (36h), got "1w"`},
		{"1e9d", 0, `want a number of days up to 100000 (7d) or a duration (36h), got "1e9d"`},
		{"NaNd", 0, `want a number of days up to 100000 (7d) or a duration (36h), got "NaNd"`},
		{"1_0d", 0, `want a number of days (7d) or a duration (36h), got "1_0d"`},
	} {
		var a age
		msg := ""
		if err := a.Set(tc.in); err != nil {
			msg = err.Error()
		}
		if msg != tc.err || time.Duration(a) != tc.want {
			t.Errorf("Set(%q) = %v, %q; want %v, %q", tc.in, time.Duration(a), msg, tc.want, tc.err)
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
