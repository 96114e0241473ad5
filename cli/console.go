package cli

import (
	"fmt"
	"io"
	"sync"
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
	for _, l := range lines {
		fmt.Fprintf(c.w, "%s\n", l)
	}
	c.shown = len(lines)
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
