package cli

import (
	"context"
	"os"
	"os/signal"
	"sync/atomic"
)

// graceful counts the sections under way that stop on their own when the
// command's context ends: a run (apply, bench, a probe), which stops its
// stages and leaves its outputs whole or absent, and a prune, which
// removes cache by cache. Outside them nothing looks at the context —
// validate walking a large tree, inspect reading a pipe nobody writes —
// and the first signal ends the process at once, as it would without a
// handler: the first was swallowed, and `timeout` could not stop them.
var graceful atomic.Int32

// stopsGracefully marks a section that ends on its own when the context
// does, and returns the function that ends the mark.
func stopsGracefully() (done func()) {
	graceful.Add(1)
	return func() { graceful.Add(-1) }
}

// notifyContext is signal.NotifyContext for Main: the first of sigs
// cancels the context inside a graceful section, and otherwise ends the
// process by that signal (raise). Either way the next has its default
// action and ends the process at once: a stage stuck in a system call (a
// hung mount, a named pipe nobody writes) never sees the first, and the
// run could only be killed.
func notifyContext(sigs ...os.Signal) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	c := make(chan os.Signal, 1)
	signal.Notify(c, sigs...)
	go func() {
		select {
		case sig := <-c:
			signal.Reset(sigs...)
			if graceful.Load() == 0 {
				raise(sig)
			}
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(c)
		cancel()
	}
}
