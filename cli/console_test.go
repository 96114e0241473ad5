package cli

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// screen replays what a terminal would show for out, which holds only
// whole lines, cursor-up (ESC[nA) and clear-to-end-of-screen (ESC[J).
func screen(t *testing.T, out string) []string {
	t.Helper()
	var rows []string
	row := 0
	esc := regexp.MustCompile(`^\x1b\[(\d*)([AJ])`)
	for len(out) > 0 {
		if m := esc.FindStringSubmatch(out); m != nil {
			out = out[len(m[0]):]
			if m[2] == "A" {
				n, _ := strconv.Atoi(m[1])
				row = max(0, row-n)
			} else {
				rows = rows[:min(row, len(rows))]
			}
			continue
		}
		line, rest, ok := strings.Cut(out, "\n")
		if !ok || strings.Contains(line, "\x1b") {
			t.Fatalf("not whole lines and known escapes: %q", out)
		}
		out = rest
		if row < len(rows) {
			rows[row] = line
		} else {
			rows = append(rows, line)
		}
		row++
	}
	return rows
}

// TestConsoleKeepsLogLinesAboveProgress: log lines written between progress
// redraws stay on screen, above one copy of the latest progress lines (found
// by a new-user test: each redraw wrote over the last log line and left
// stale progress lines behind).
func TestConsoleKeepsLogLinesAboveProgress(t *testing.T) {
	var out bytes.Buffer
	c := &console{w: &out}
	c.Write([]byte("starting\n"))
	c.Progress([]string{"a 1", "b 1"})
	c.Progress([]string{"a 2", "b 2"})
	c.Write([]byte("trainer connected\n"))
	c.Write([]byte("trainer left\n"))
	c.Progress([]string{"a 3", "b 3"})
	if got, want := strings.Join(screen(t, out.String()), "|"), "starting|trainer connected|trainer left|a 3|b 3"; got != want {
		t.Errorf("screen %q\nwant   %q", got, want)
	}
	c.ClearProgress()
	c.Write([]byte("done\n"))
	if got, want := strings.Join(screen(t, out.String()), "|"), "starting|trainer connected|trainer left|done"; got != want {
		t.Errorf("after the run: screen %q\nwant %q", got, want)
	}
}

// TestConsoleCutsProgressToTheTerminal: a progress line wider than the
// terminal wraps onto a second row, which the cursor-up of the next
// redraw, counting lines, leaves behind (a soak test on an 80-column
// terminal: 59 stale copies on a 70-row screen). Lines are cut to the
// width less one, with an ellipsis, and a log line is left whole.
func TestConsoleCutsProgressToTheTerminal(t *testing.T) {
	var out bytes.Buffer
	c := &console{w: &out, cols: func() int { return 20 }}
	c.Progress([]string{"out: 1234 samples, 99/s, 0:12 elapsed, ETA 0:30", "short"})
	c.Progress([]string{"out: 2345 samples, 98/s, 0:13 elapsed, ETA 0:29", "short"})
	c.Write([]byte("a log line longer than twenty columns\n"))
	c.Progress([]string{"épée ─ 3456 samples, 97/s", "short"})
	got := strings.Join(screen(t, out.String()), "|")
	if want := "a log line longer than twenty columns|épée ─ 3456 sample…|short"; got != want {
		t.Errorf("screen %q\nwant   %q", got, want)
	}
	// Width unknown (not a terminal, or the size cannot be read): whole.
	out.Reset()
	c = &console{w: &out, cols: func() int { return 0 }}
	c.Progress([]string{"out: 1234 samples, 99/s, 0:12 elapsed, ETA 0:30"})
	if got := strings.Join(screen(t, out.String()), "|"); got != "out: 1234 samples, 99/s, 0:12 elapsed, ETA 0:30" {
		t.Errorf("unknown width: %q", got)
	}
}
