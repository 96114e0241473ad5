package cli

import (
	"context"
	"os"
	"os/signal"
	"sync/atomic"
	"time"
)

// echoWindow is how long after the first signal a second is taken for
// the same one sent twice, not for a user's second Ctrl-C: a person
// presses it again after several times this.
const echoWindow = 200 * time.Millisecond

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
//
// A signal within echoWindow of the first counts as the first: GNU
// timeout (without --foreground) signals the process and then its
// process group, two signals microseconds apart, and the second ended
// the run at once, with no report and its temporary files left (a soak
// test: 1 to 5 runs in 30).
func notifyContext(sigs ...os.Signal) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	c := make(chan os.Signal, 2)
	stopped := make(chan struct{})
	signal.Notify(c, sigs...)
	go func() {
		select {
		case sig := <-c:
			if graceful.Load() == 0 {
				signal.Reset(sigs...)
				raise(sig)
			}
			cancel()
			echo := time.NewTimer(echoWindow)
			defer echo.Stop()
			select {
			case <-echo.C:
			case <-stopped:
				// The command ended within the window: a Reset now
				// would undo whatever handler comes after it.
				return
			}
			// Until the window ends the handler stays, and signals wait
			// in c unread: dropped, as a repeat of the first.
			signal.Reset(sigs...)
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(c)
		close(stopped)
		cancel()
	}
}
