package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"unicode/utf8"

	"golang.org/x/term"
)

// console is stderr as log lines, messages and apply's live progress share
// it on a terminal. The progress lines stay below everything else: any
// other write first erases them (they are redrawn at the next tick), so a
// log line that comes mid-run is neither overwritten by the redraw nor
// left between stale copies of the progress lines.
type console struct {
	mu sync.Mutex
	w  io.Writer
	// shown is how many progress lines are on screen, at its bottom.
	shown int
	// cols returns the terminal's width, 0 where it is not known. A
	// progress line wider than the terminal wraps onto a second row,
	// which the next redraw's cursor-up, counting lines, leaves behind
	// (a soak test on an 80-column terminal: 59 stale copies on a
	// 70-row screen), so they are cut to fit.
	cols func() int
}

// Write writes p below the text so far, erasing the progress lines first.
func (c *console) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.eraseLocked()
	return c.w.Write(p)
}

// Progress replaces the progress lines on screen with lines.
func (c *console) Progress(lines []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.eraseLocked()
	width := 0
	if c.cols != nil {
		width = c.cols()
	}
	for _, l := range lines {
		fmt.Fprintf(c.w, "%s\n", cut(l, width))
	}
	c.shown = len(lines)
}

// cut shortens l to width-1 characters, the last an ellipsis, so that it
// fits a terminal of width columns without touching its edge (some
// terminals wrap there); width 0 leaves it whole.
func cut(l string, width int) string {
	if width < 2 || utf8.RuneCountInString(l) < width {
		return l
	}
	r := []rune(l)
	return string(r[:width-2]) + "…"
}

// ClearProgress erases the progress lines.
func (c *console) ClearProgress() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.eraseLocked()
}

func (c *console) eraseLocked() {
	if c.shown > 0 {
		// Up to the first progress line, and clear to the end of the screen.
		fmt.Fprintf(c.w, "\x1b[%dA\x1b[J", c.shown)
		c.shown = 0
	}
}

// widthOf returns a function that reads the width of the terminal w is,
// at each call (a window may be resized mid-run), or 0.
func widthOf(w io.Writer) func() int {
	f, ok := w.(*os.File)
	if !ok {
		return func() int { return 0 }
	}
	return func() int {
		cols, _, err := term.GetSize(int(f.Fd()))
		if err != nil {
			return 0
		}
		return cols
	}
}
