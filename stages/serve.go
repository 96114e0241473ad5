package stages

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/serve"
	"github.com/piperun/piperun/spec"
)

// The hooks this file's types provide, checked by the compiler: the
// engine and planner find them by type assertion, where a changed
// signature would silently turn a hook off.
var (
	_ plan.Reserver    = (*ServeConfig)(nil)
	_ spec.Checker     = (*ServeConfig)(nil)
	_ spec.Outputter   = (*ServeConfig)(nil)
	_ Announcer        = (*serveSink)(nil)
	_ ContextCommitter = (*serveSink)(nil)
	_ Drainer          = (*serveSink)(nil)
	_ EpochEnder       = (*serveSink)(nil)
	_ Idler            = (*serveSink)(nil)
	_ Sink             = (*serveSink)(nil)
)

// ServeConfig configures the serve sink.
type ServeConfig struct {
	Listen string        `yaml:"listen" jsonschema:"required" jsonschema_description:"Where trainers connect: unix:///path/to.sock (a relative path resolves against the spec's directory) or tcp://HOST:PORT. One trainer is served at a time; the next to connect takes over when it leaves."`
	Window spec.ByteSize `yaml:"window" jsonschema_description:"Bytes of sent samples kept until the trainer acknowledges them, inside the memory budget (a sample larger than the window waits for its acknowledgement before the next is taken). Default: 32MiB, or an eighth of the budget where that is less."`
	// TrainerTimeout ends a run left without a trainer: one whose trainer
	// died waited for ever, an orphan holding its memory and its address
	// (a new-user test under a DDP launcher).
	TrainerTimeout spec.Duration `yaml:"trainer_timeout" jsonschema_description:"Fail the run when no trainer is connected for this long, before the first or after one leaves, e.g. 10m. Default: wait until stopped."`
}

// DefaultServeWindow is the serve window where the budget is large enough.
const DefaultServeWindow = 32 << 20

// window is the serve window's size under a memory budget of memory bytes
// (0: none).
func (c *ServeConfig) window(memory int64) int64 {
	switch {
	case c.Window > 0:
		return int64(c.Window)
	case memory > 0:
		return min(DefaultServeWindow, memory/8)
	}
	return DefaultServeWindow
}

// ReservedBytes implements plan.Reserver: the window, reserved for the run
// since its samples stay in memory after the engine has handed them over.
func (c *ServeConfig) ReservedBytes(memory int64) int64 { return c.window(memory) }

// ReservedFor implements plan.Reserver.
func (c *ServeConfig) ReservedFor() string {
	return "its window of samples sent and not yet acknowledged"
}

// maxUnixPath is the longest socket path Linux takes (sun_path less its NUL).
const maxUnixPath = 107

// pollEvery is how often a sink blocked on its socket looks at the run's
// context, so Ctrl-C stops a run whose trainer never connects or reads.
const pollEvery = 200 * time.Millisecond

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "serve", Role: spec.RoleSink,
			Doc:       "Streams samples (batches) to a trainer process over a Unix or TCP socket; see clients/python.",
			NewConfig: func() any { return &ServeConfig{} }},
		Build: func(env *Env, cfg any) (any, error) { return newServeSink(env, cfg.(*ServeConfig)) },
	})
}

// OutputPaths implements spec.Outputter: a Unix socket's file.
func (c *ServeConfig) OutputPaths(resolve func(string) string) []string {
	network, addr, err := c.address(resolve)
	switch {
	case err != nil:
		return nil
	case network == "unix":
		return []string{addr}
	case strings.HasSuffix(addr, ":0"): // a port of the kernel's choosing each
		return nil
	}
	return []string{"tcp://" + addr} // two sinks cannot listen on one
}

// address resolves a unix socket path against the spec's directory.
func (c *ServeConfig) address(resolve func(string) string) (network, addr string, err error) {
	network, addr, err = serve.ParseAddress(c.Listen)
	if err != nil {
		return "", "", err
	}
	if network == "unix" {
		addr = resolve(addr)
		if len(addr) > maxUnixPath {
			return "", "", fmt.Errorf("socket path %s is %d bytes, more than the %d a Unix socket allows; choose a shorter one", addr, len(addr), maxUnixPath)
		}
	}
	return network, addr, nil
}

// Check implements spec.Checker.
func (c *ServeConfig) Check(cc *spec.CheckContext) sample.Schema {
	if c.Listen == "" {
		cc.Errorf("listen", "must not be empty: unix:///path/to.sock or tcp://127.0.0.1:PORT")
		return sample.Schema{}
	}
	network, addr, err := c.address(cc.Resolve)
	if err != nil {
		cc.Errorf("listen", "%v", err)
		return sample.Schema{}
	}
	switch {
	case !cc.Environment:
	case network == "unix":
		if err := checkDirFor(addr, "socket directory"); err != nil {
			cc.Errorf("listen", "%v", err)
		} else if err := staleSocket(addr); err != nil {
			cc.Errorf("listen", "%v%s", err, sharedAddressHint(cc))
		}
	default:
		// The port may be taken (by a run serving there now) or the host
		// not this machine's: try it.
		ln, err := net.Listen(network, addr)
		if err != nil {
			cc.Errorf("listen", "cannot listen on %s: %v%s", c.Listen, errors.Unwrap(err), sharedAddressHint(cc))
		} else {
			ln.Close()
		}
	}
	sharedAddress(cc, c.Listen)
	return sample.Schema{}
}

// sharedAddress warns, for a serve sink in a spec that N processes run as
// shards, that each listens at the same address where it is the same in
// every process: on one machine (the ranks of one node) only the first
// can listen there, and the others are refused (a new-user test's second
// rank was refused as an invalid spec, with no word of the rank).
func sharedAddress(cc *spec.CheckContext, listen string) {
	// Port 0: the system picks one for each process.
	per, _, others := perProcess(cc, "listen", true)
	if per || strings.HasPrefix(listen, "tcp://") && strings.HasSuffix(listen, ":0") {
		return
	}
	if n, from, rank := shardedProcesses(cc.Spec); n > 1 {
		fix := fmt.Sprintf("give each process an address of its own (--set stages.%s.listen=..., as you set its shard)", cc.Stage.Name)
		if _, err := strconv.Atoi(rank); err != nil {
			if p, ok := strings.CutPrefix(listen, "unix://"); ok {
				ext := filepath.Ext(p)
				fix = fmt.Sprintf("put the rank in the address (unix://%s-${%s}%s)", strings.TrimSuffix(p, ext), rank, ext)
			} else {
				fix = fmt.Sprintf("give each process a port of its own (--set stages.%s.listen=tcp://HOST:PORT from the launcher, a port a rank)", cc.Stage.Name)
			}
		}
		cc.Warnf("listen", "%s this is one of %d processes, and each serves at %s%s: on one machine only the first can listen there, and the others are refused; %s", from, n, listen, unlessDiffer(others), fix)
	}
}

// sharedAddressHint is what a refused address adds in a spec that N
// processes run as shards.
func sharedAddressHint(cc *spec.CheckContext) string {
	if n, _, _ := shardedProcesses(cc.Spec); n > 1 {
		if per, _, _ := perProcess(cc, "listen", true); per {
			return ""
		}
		return fmt.Sprintf(" (this is one of %d processes: each needs an address of its own)", n)
	}
	return ""
}

// staleSocket checks that nothing but a dead socket is at path: a file that
// is no socket, or a socket another process serves, is an error.
func staleSocket(path string) error {
	st, err := os.Lstat(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("another process serves at %s", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

type serveSink struct {
	log     *zap.Logger
	listen  string
	network string
	addr    string
	// sock is the socket file this sink made at addr (unix), which it
	// removes at the end only if it is still there; lock is held while it
	// serves there (lockSocket).
	sock    os.FileInfo
	lock    *os.File
	ln      net.Listener
	conn    net.Conn
	hello   serve.Hello
	waiting bool
	// timeout is trainer_timeout, 0 for none.
	timeout time.Duration
	// pending are connections accepted but not yet served: some still
	// greeting, some greeted and waiting for the trainer before them.
	pending []*pendingConn
	// sent counts sample frames queued for trainers, in all and in the
	// current epoch.
	sent, epochSent int64
	// epochs counts the ends of epoch queued; delivered is the epoch of
	// the last sample a trainer acknowledged, -1 before the first, and
	// deliveredIn how many of that epoch's samples were acknowledged.
	epochs, delivered int
	deliveredIn       int64
	// queue holds the frames no trainer has acknowledged, oldest first;
	// the first written of them have gone to the current connection,
	// which has acknowledged acked frames in all; ackBuf holds a part
	// of an acknowledgement.
	queue       []*outFrame
	queuedBytes int64
	// window bounds queuedBytes once Write returns: the bytes the plan
	// reserved for the sink (ServeConfig.ReservedBytes).
	window  int64
	written int
	acked   uint64
	ackBuf  []byte
	// endRead says the last frame this connection acknowledged ended
	// epoch endEpoch: a trainer that leaves then has read the epoch to its
	// end, as a loader made anew each epoch does.
	endRead  bool
	endEpoch int
	// served is set once a trainer has connected; idle is the time in
	// nanoseconds since spent with none connected (IdleTime).
	served bool
	idle   atomic.Int64
	// batched is set once a sample sent was a batch: the log then counts
	// batches, which is what the trainer sees.
	batched bool
	// idleSince is when the current time without a trainer began, in
	// nanoseconds since the Unix epoch, or 0 while one is served: so that
	// IdleTime, read by the live progress, counts a gap still under way.
	idleSince atomic.Int64
	// firstWait is set while the sink waits for its first trainer: no gap
	// between trainers (IdleTime), but waiting all the same.
	firstWait atomic.Bool
}

// Idle implements Idler: no trainer has come yet, or one left and none
// has come since.
func (s *serveSink) Idle() bool { return s.idleSince.Load() > 0 || s.firstWait.Load() }

// IdleTime implements Idler: the time between trainers.
func (s *serveSink) IdleTime() time.Duration {
	d := s.idle.Load()
	if t := s.idleSince.Load(); t > 0 {
		d += max(0, time.Now().UnixNano()-t)
	}
	return time.Duration(d)
}

// pendingConn is an accepted connection and how much of its greeting came.
type pendingConn struct {
	c     net.Conn
	since time.Time
	got   int
	greet [len(serve.ClientHello)]byte
}

func newServeSink(env *Env, c *ServeConfig) (*serveSink, error) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		return nil, errors.New("serve sends tensors as they lie in memory, little-endian; this machine is big-endian")
	}
	network, addr, err := c.address(env.Resolve)
	if err != nil {
		return nil, err
	}
	var lock *os.File
	if network == "unix" {
		if err := MkdirAll(filepath.Dir(addr)); err != nil {
			return nil, fmt.Errorf("listen on %s: %w", c.Listen, err)
		}
		if lock, err = lockSocket(addr); err != nil {
			return nil, err
		}
		if err := staleSocket(addr); err != nil { // one of a run without the lock
			lock.Close()
			return nil, err
		}
		os.Remove(addr) // a dead socket from a run that crashed
		// And the temporary name a run killed between its listen and its
		// link left: under the lock, no other run is between the two (a
		// review: they stayed for good).
		if old, err := filepath.Glob(spec.EscapeGlob(filepath.Join(filepath.Dir(addr), "."+filepath.Base(addr)+".tmp-")) + "*"); err == nil {
			for _, o := range old {
				os.Remove(o)
			}
		}
	}
	ln, sock, err := listen(network, addr)
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		// Not the address twice ("listen on tcp://h:p: listen tcp h:p:"),
		// and what a port in use means (a test of concurrent runs).
		var op *net.OpError
		if errors.As(err, &op) {
			err = op.Err
		}
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("listen on %s: %w (another process listens there)", c.Listen, err)
		}
		return nil, fmt.Errorf("listen on %s: %w", c.Listen, err)
	}
	hello := serve.Hello{Protocol: serve.Protocol, Pipeline: env.Spec.Name, Stage: env.Stage.Name, Seed: env.Seed, Epochs: env.Spec.Epochs}
	if _, err := serve.EncodeJSON(serve.KindHello, hello); err != nil {
		ln.Close()
		if network == "unix" {
			os.Remove(addr)
			lock.Close()
		}
		return nil, err
	}
	// Say where trainers connect: the absolute socket path, the port where
	// the spec asked for 0.
	listen := network + "://" + ln.Addr().String()
	if network == "unix" {
		listen = network + "://" + addr // not the name it was bound under
	}
	return &serveSink{log: env.Log, listen: listen, network: network, addr: addr, sock: sock, lock: lock, ln: ln, hello: hello,
		window: c.window(env.Memory), delivered: -1, timeout: time.Duration(c.TrainerTimeout)}, nil
}

// connect waits for a trainer unless one is connected, and greets it.
// Connections are accepted and their greetings read without waiting on
// any one of them, so a client that connects and says nothing (a stalled
// probe) holds up no trainer: it is closed after greetWithin.
func (s *serveSink) connect(ctx context.Context) error {
	if s.conn == nil && s.served {
		t0 := time.Now()
		s.idleSince.Store(t0.UnixNano())
		defer func() {
			// Cleared first: a reader between the two misses the gap for
			// a moment rather than counting it twice.
			s.idleSince.Store(0)
			s.idle.Add(int64(time.Since(t0)))
		}()
	}
	if s.conn == nil && !s.served {
		s.firstWait.Store(true)
		defer s.firstWait.Store(false)
	}
	start := time.Now()
	for s.conn == nil {
		if !s.waiting {
			s.waiting = true
			fields := []zap.Field{zap.String("listen", s.listen)}
			if s.timeout > 0 {
				fields = append(fields, zap.Duration("trainer_timeout", s.timeout))
			}
			s.log.Info("waiting for a trainer to connect", fields...)
		}
		if d, ok := s.ln.(interface{ SetDeadline(time.Time) error }); ok {
			wait := acceptEvery
			if len(s.pending) == 0 {
				wait = idleAcceptEvery // no greeting to read meanwhile
			}
			d.SetDeadline(time.Now().Add(wait))
		}
		c, err := s.ln.Accept()
		if err == nil {
			s.pending = append(s.pending, &pendingConn{c: c, since: time.Now()})
		} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			return fmt.Errorf("accept on %s: %w", s.listen, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if c = s.greeted(); c != nil {
			if err := s.adopt(ctx, c); err != nil {
				return err
			}
		} else if s.timeout > 0 && time.Since(start) >= s.timeout {
			if s.served {
				return fmt.Errorf("no trainer took over at %s within trainer_timeout (%s) after the last one left", s.listen, s.timeout)
			}
			return fmt.Errorf("no trainer connected to %s within trainer_timeout (%s)", s.listen, s.timeout)
		}
	}
	return nil
}

// adopt sends the hello to c, a connection that greeted as a trainer, and
// makes it the trainer being served; one that leaves before the hello is
// closed and s.conn stays nil. The error is ctx's, if it ended.
func (s *serveSink) adopt(ctx context.Context, c net.Conn) error {
	s.waiting = false
	// A trainer that left after an epoch's last sample, before its end
	// of epoch, had that epoch: the next would take the end for an empty
	// epoch of its own (a restarted trainer's loop, which
	// ends at an empty epoch, stopped at once, and the run waited on).
	for len(s.queue) > 0 && s.queue[0].smp == nil && s.queue[0].epoch == s.delivered {
		s.queuedBytes -= s.queue[0].bytes
		s.queue[0] = nil
		s.queue = s.queue[1:]
	}
	hello := s.hello
	if s.served {
		hello.Resume = s.resume()
	}
	b, err := serve.EncodeJSON(serve.KindHello, hello)
	if err != nil {
		c.Close()
		return err
	}
	if err := s.write(ctx, c, net.Buffers{b}); err != nil {
		c.Close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.log.Warn("trainer left before the hello", zap.Error(err))
		return nil
	}
	s.conn = c
	s.served = true
	s.written, s.acked, s.ackBuf, s.endRead = 0, 0, s.ackBuf[:0], false
	if s.network == "tcp" {
		s.log.Info("trainer connected", zap.String("from", c.RemoteAddr().String()))
	} else {
		s.log.Info("trainer connected")
	}
	return nil
}

// resume is where a trainer taking over starts: at the first frame no
// trainer acknowledged, the epoch's ends already dropped (adopt).
func (s *serveSink) resume() *serve.Resume {
	epoch := s.epochs // nothing queued: the next epoch's first frame
	if len(s.queue) > 0 {
		epoch = s.queue[0].epoch
	}
	r := &serve.Resume{Epoch: epoch}
	if epoch == s.delivered {
		r.Frames = s.deliveredIn
	}
	return r
}

// waitingWithin is how long a commit whose trainer left after the last
// sample reads the greetings of connections already made, looking for a
// trainer waiting to take over.
const waitingWithin = 200 * time.Millisecond

// takeWaiting makes a trainer that is already waiting, connected while
// another was served, the one being served: it accepts the connections
// made and reads their greetings for up to waitingWithin. It returns at
// once when no connection is waiting; s.conn stays nil if none greets.
func (s *serveSink) takeWaiting(ctx context.Context) error {
	end := time.Now().Add(waitingWithin)
	for s.conn == nil && time.Now().Before(end) {
		if d, ok := s.ln.(interface{ SetDeadline(time.Time) error }); ok {
			d.SetDeadline(time.Now().Add(time.Millisecond))
		}
		c, err := s.ln.Accept()
		if err == nil {
			s.pending = append(s.pending, &pendingConn{c: c, since: time.Now()})
			continue
		}
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() || len(s.pending) == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if c = s.greeted(); c != nil {
			if err := s.adopt(ctx, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// acceptEvery is how long connect waits for a connection before it looks
// at the greetings of those it has.
const acceptEvery = 20 * time.Millisecond

// idleAcceptEvery is how long connect waits for a connection when none is
// pending: a connection ends the wait at once, so this only bounds how
// soon a stop is seen, and spares a run waiting hours for its trainer
// fifty wake-ups a second.
const idleAcceptEvery = 100 * time.Millisecond

// greetWithin is how long a new connection has to send serve.ClientHello.
const greetWithin = 2 * time.Second

// greeted reads what has come of the pending connections' greetings,
// without waiting, and returns the first that greeted as a trainer (in
// the order they connected); connections that greet wrongly, close or
// say nothing for greetWithin are closed, so that no probe takes a frame.
func (s *serveSink) greeted() net.Conn {
	var found net.Conn
	keep := s.pending[:0]
	for _, p := range s.pending {
		if found == nil && p.got < len(p.greet) {
			p.c.SetReadDeadline(time.Now().Add(time.Millisecond))
			n, err := p.c.Read(p.greet[p.got:])
			p.got += n
			var why string
			switch {
			case p.got == len(p.greet) && string(p.greet[:]) != serve.ClientHello:
				why = fmt.Sprintf("greeted with %q, not %q", p.greet[:], serve.ClientHello)
			case p.got == len(p.greet):
			case err != nil && !isTimeout(err):
				why = err.Error()
			case time.Since(p.since) > greetWithin:
				why = fmt.Sprintf("no greeting within %s", greetWithin)
			}
			if why != "" {
				p.c.Close()
				s.log.Warn("closed a connection that did not greet as a trainer (a port probe, or validate's check)", zap.String("why", why))
				continue
			}
		}
		if found == nil && p.got == len(p.greet) {
			p.c.SetReadDeadline(time.Time{})
			found = p.c
			continue
		}
		keep = append(keep, p)
	}
	for i := len(keep); i < len(s.pending); i++ {
		s.pending[i] = nil
	}
	s.pending = keep
	return found
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// write writes bufs whole to c, looking at ctx while the trainer does not
// read. Its error is the connection's, or ctx's. bufs is consumed.
func (s *serveSink) write(ctx context.Context, c net.Conn, bufs net.Buffers) error {
	for len(bufs) > 0 {
		c.SetWriteDeadline(time.Now().Add(pollEvery))
		_, err := bufs.WriteTo(c) // consumes what it wrote
		if err == nil {
			break
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			if err := ctx.Err(); err != nil {
				return err
			}
			continue
		}
		return s.connErr(err)
	}
	return nil
}

// connErr names the socket as the spec does: a unix listener bound under
// a temporary name (listen) puts that name in the connection's errors.
func (s *serveSink) connErr(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return fmt.Errorf("trainer at %s: %w", s.listen, oe.Err)
	}
	return fmt.Errorf("trainer at %s: %w", s.listen, err)
}

// outFrame is a frame sent to trainers, kept until one acknowledges it.
type outFrame struct {
	bufs  net.Buffers    // the frame; copied for each write, which consumes it
	smp   *sample.Sample // recycled once acknowledged; nil for an end of epoch
	bytes int64
	epoch int // the epoch the sample belongs to, or the end of epoch ends
}

// A frame counts as delivered when the trainer acknowledges it, not when
// the kernel takes it: a trainer that leaves takes with it whatever its
// socket's buffers held (up to megabytes over TCP), and a review saw 97 of
// 100 batches lost so, the run reporting success. Unacknowledged frames
// go again, first, to the next trainer. The window bounds what is kept:
// its bytes (serveSink.window) are reserved from the memory budget, as the
// engine gives a sample's reservation back once Write returns; a frame
// larger than the window is acknowledged before Write returns, while the
// sample's own reservation covers it.
const maxUnackedFrames = 256

// errTrainerLeft marks a connection lost; the frames not acknowledged on
// it wait for the next trainer.
var errTrainerLeft = errors.New("trainer left")

// send queues a frame and writes what the current trainer has not been
// sent, waiting for acknowledgements while the window is full.
func (s *serveSink) send(ctx context.Context, f *outFrame) error {
	s.queue = append(s.queue, f)
	s.queuedBytes += f.bytes
	if f.smp == nil && s.conn == nil && s.served {
		// An end of epoch waits, queued, for the next sample's trainer or
		// for the commit: a trainer that left after the last sample need
		// not be replaced to be told the epoch ended (CommitContext).
		return nil
	}
	for {
		err := s.flush(ctx)
		if err == nil {
			for len(s.queue) > maxUnackedFrames || s.queuedBytes > s.window {
				if err = s.readAcks(ctx, true); err != nil {
					break
				}
			}
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, errTrainerLeft) {
			return err
		}
		if onlyMarkers(s.queue) {
			// The trainer left having acknowledged every sample: ends of
			// epoch wait in the queue, and the next sample's Write (or the
			// commit) looks for a trainer if one is needed.
			return nil
		}
	}
}

// flush connects a trainer if none is, and writes it the queued frames it
// has not been sent, reading the acknowledgements that have come.
func (s *serveSink) flush(ctx context.Context) error {
	if err := s.connect(ctx); err != nil {
		return err
	}
	for s.written < len(s.queue) {
		f := s.queue[s.written]
		if err := s.write(ctx, s.conn, append(net.Buffers(nil), f.bufs...)); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return s.left(err)
		}
		s.written++
	}
	return s.readAcks(ctx, false)
}

// left drops the connection to a trainer that went away; the frames it
// did not acknowledge go to the next.
func (s *serveSink) left(err error) error {
	// The acknowledgements it sent before it went are still to be read:
	// without them the frames it read would go to the next trainer again.
	var buf [512]byte
	for range 64 {
		n, rerr := readNow(s.conn, buf[:])
		if n == 0 || rerr != nil || s.take(buf[:n]) != nil {
			break
		}
	}
	unacked := 0 // samples; the queue also holds ends of epoch
	for _, f := range s.queue {
		if f.smp != nil {
			unacked++
		}
	}
	switch {
	case unacked == 0:
		// Every sample reached it: no loss to warn of (a trainer that
		// stops after its last batch, or between epochs).
		// Not an error: the connection's end is how it left.
		s.log.Info("trainer left having acknowledged every "+s.unit(false)+" sent", zap.String("connection", err.Error()),
			zap.Int64(s.unit(true)+"_sent", s.sent), zap.Int("ends_of_epoch_unread", len(s.queue)))
	case s.endRead:
		// The batches of the next epoch sent ahead go again to the next
		// trainer, from that epoch's first: nothing to warn of (a soak
		// test saw the warning below at 2,219 of 2,233 epochs).
		s.log.Info(fmt.Sprintf("trainer left at the end of epoch %d; the next to connect gets epoch %d from its first %s", s.endEpoch, s.endEpoch+1, s.unit(false)),
			zap.String("connection", err.Error()), zap.Int(s.unit(true)+"_sent_ahead", unacked))
	default:
		s.log.Warn("trainer left; the next to connect gets the rest, from the first "+s.unit(false)+" it did not acknowledge",
			zap.Error(err), zap.Int64(s.unit(true)+"_sent", s.sent), zap.Int(s.unit(true)+"_unacknowledged", unacked))
	}
	s.conn.Close()
	s.conn = nil
	s.written, s.acked, s.ackBuf = 0, 0, s.ackBuf[:0]
	return fmt.Errorf("%w: %w", errTrainerLeft, err)
}

// readAcks takes in the trainer's acknowledgements: each is its count of
// frames read on this connection, 8 bytes little-endian. Without block it
// reads only what has come; with block it waits for at least one, looking
// at ctx every pollEvery.
func (s *serveSink) readAcks(ctx context.Context, block bool) error {
	var buf [512]byte
	for {
		var n int
		var err error
		if block {
			s.conn.SetReadDeadline(time.Now().Add(pollEvery))
			n, err = s.conn.Read(buf[:])
			// A deadline left set would fail the reads that do not
			// wait (readNow) once it passes, as if the trainer left.
			s.conn.SetReadDeadline(time.Time{})
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				if err := ctx.Err(); err != nil {
					return err
				}
				continue
			}
		} else {
			n, err = readNow(s.conn, buf[:])
			if n == 0 && err == nil {
				return nil
			}
		}
		if n == 0 && err == nil {
			err = io.EOF
		}
		if n > 0 {
			if aerr := s.take(buf[:n]); aerr != nil {
				return s.left(aerr)
			}
			if err == nil {
				if block {
					return nil
				}
				continue
			}
		}
		return s.left(s.connErr(err))
	}
}

// take applies the acknowledgements in b (and a part of one left before).
func (s *serveSink) take(b []byte) error {
	s.ackBuf = append(s.ackBuf, b...)
	defer func() { s.ackBuf = append(s.ackBuf[:0:0], s.ackBuf...) }()
	for len(s.ackBuf) >= serve.AckSize {
		a := binary.LittleEndian.Uint64(s.ackBuf)
		s.ackBuf = s.ackBuf[serve.AckSize:]
		if a < s.acked {
			return fmt.Errorf("acknowledged %d frames after %d, a count that went down: not a piperun client", a, s.acked)
		}
		if a-s.acked > uint64(s.written) {
			return fmt.Errorf("acknowledged %d frames of %d sent: not a piperun client", a, s.acked+uint64(s.written))
		}
		for ; s.acked < a; s.acked++ {
			f := s.queue[0]
			s.queue[0] = nil
			s.queue = s.queue[1:]
			s.written--
			s.queuedBytes -= f.bytes
			s.endRead, s.endEpoch = f.smp == nil, f.epoch
			if f.smp != nil {
				f.smp.Recycle() // delivered: this sink was its last holder
				if f.epoch != s.delivered {
					s.deliveredIn = 0
				}
				s.delivered = f.epoch
				s.deliveredIn++
			}
		}
	}
	return nil
}

func (s *serveSink) Write(ctx context.Context, smp *sample.Sample) error {
	bufs, err := serve.EncodeSample(smp)
	if err != nil {
		return err
	}
	var n int64
	for _, b := range bufs {
		n += int64(len(b))
	}
	// What the window holds is the memory the sample keeps, which the
	// engine reserved for it: more than the frame where a short last batch
	// sits in a full batch's buffer.
	n = max(n, smp.Held)
	s.sent++
	s.epochSent++
	epoch := s.epochs
	s.batched = s.batched || smp.BatchSize > 0
	return s.send(ctx, &outFrame{bufs: bufs, smp: smp, bytes: n, epoch: epoch})
}

// EndEpoch tells the trainer the epoch is over.
func (s *serveSink) EndEpoch(ctx context.Context, epoch int, _ Emit) error {
	n, ended := s.epochSent, s.epochs
	s.epochSent = 0
	s.epochs++
	b, err := serve.EncodeJSON(serve.KindEndOfEpoch, serve.EpochHeader{Epoch: epoch, Frames: n})
	if err != nil {
		return err
	}
	return s.send(ctx, &outFrame{bufs: net.Buffers{b}, bytes: int64(len(b)), epoch: ended})
}

// Commit is CommitContext without a way to stop it.
func (s *serveSink) Commit() error { return s.CommitContext(context.Background()) }

// waitNotice is how often a sink waiting for its trainer to read the end
// of the stream says so.
const waitNotice = 30 * time.Second

// CommitContext waits until a trainer has acknowledged every frame,
// however long the trainer takes to read them (an evaluation, a
// checkpoint), handing what one that leaves did not acknowledge to the
// next, then sends the end of the stream. A trainer that leaves having
// read every sample and end of epoch, without the end of the stream (it
// stopped after its last epoch), is no failure. ctx is the run's: Ctrl-C
// stops the wait, and the run then fails, as it did not deliver; the
// trainer sees the stream cut.
func (s *serveSink) CommitContext(ctx context.Context) error {
	defer s.shut()
	b, err := serve.EncodeJSON(serve.KindEndOfStream, serve.EndHeader{Frames: s.sent})
	if err != nil {
		return err
	}
	if err := s.Drain(ctx); err != nil {
		return err
	}
	// Every frame is delivered. A trainer still connected is told the
	// stream ended; one that has gone needs no more, but one already
	// waiting to take over from it is told the stream ended rather than
	// cut off unread. takeWaiting's only error is ctx's.
	if s.conn == nil && s.served {
		_ = s.takeWaiting(ctx)
	}
	if s.conn != nil {
		if err := s.write(ctx, s.conn, net.Buffers{b}); err != nil && ctx.Err() == nil {
			s.log.Info("the trainer left before the end of the stream; it had read every "+s.unit(false), zap.String("connection", err.Error()))
		}
	}
	return nil
}

// Drain implements Drainer: it waits until a trainer has acknowledged
// every frame, handing what one that leaves did not acknowledge to the
// next. It returns nil early when the trainer left having read every
// sample, before the last ends of epoch.
func (s *serveSink) Drain(ctx context.Context) error {
	// The end of the stream goes out only once every frame before it is
	// acknowledged: sent with them, it would reach a trainer even when
	// the run is stopped while it waits for the acknowledgements, and the
	// trainer would take a failed run for one that ended.
	last := time.Now()
	for len(s.queue) > 0 {
		// Looked at on every turn: a trainer that reads steadily never
		// lets a wait for acknowledgements time out, where ctx is seen.
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%d frames not delivered: %w", len(s.queue), err)
		}
		if s.conn == nil && s.served && onlyMarkers(s.queue) {
			// The trainer left having read every sample, before the end
			// of its last epoch: as one that stopped after its last
			// epoch, it has everything; waiting for another would hang.
			// But a trainer already waiting to take over is told the
			// stream ended, not cut off without a hello.
			// Its only error is ctx's: stopped now, the run has still
			// delivered every sample.
			_ = s.takeWaiting(ctx)
			if s.conn == nil {
				s.log.Info("the trainer left after the last "+s.unit(false)+", before the end of its last epoch; it had read every "+s.unit(false),
					zap.Int("ends_of_epoch_unread", len(s.queue)))
				s.queue, s.queuedBytes = s.queue[:0], 0 // read as delivered: drained
				return nil
			}
		}
		err := s.flush(ctx)
		if err == nil && len(s.queue) > 0 {
			err = s.readAcks(ctx, true)
		}
		switch {
		case err == nil || errors.Is(err, errTrainerLeft):
		default:
			return fmt.Errorf("%d frames not delivered: %w", len(s.queue), err)
		}
		if time.Since(last) > waitNotice {
			last = time.Now()
			s.log.Info("waiting for the trainer to read the end of the stream", zap.Int("frames_unacknowledged", len(s.queue)))
		}
	}
	return nil
}

// unit names what the sink sends trainers, for its log: batches, where
// a batch stage is above it, or samples; plural if many.
func (s *serveSink) unit(many bool) string {
	u := "sample"
	if s.batched {
		u = "batch"
	}
	switch {
	case many && s.batched:
		return u + "es"
	case many:
		return u + "s"
	}
	return u
}

// onlyMarkers says whether the queued frames hold no sample.
func onlyMarkers(queue []*outFrame) bool {
	for _, f := range queue {
		if f.smp != nil {
			return false
		}
	}
	return true
}

// Announces implements Announcer: the end of the stream tells the trainer
// the run succeeded, so it goes out after every other sink committed.
func (s *serveSink) Announces() {}

// Abort closes the connection without an end of stream, which tells the
// trainer that the run failed.
func (s *serveSink) Abort() error {
	s.shut()
	return nil
}

func (s *serveSink) shut() {
	if s.conn != nil {
		// Read the acknowledgements that came: closing with unread bytes
		// resets the connection, which can cost the trainer what it has
		// not read yet (over TCP) where it should see an end.
		var buf [512]byte
		for range 64 {
			if n, err := readNow(s.conn, buf[:]); n == 0 || err != nil {
				break
			}
		}
		s.conn.Close()
		s.conn = nil
	}
	for _, p := range s.pending {
		p.c.Close()
	}
	s.pending = nil
	s.ln.Close()
	// Only its own: a run that lost the race for the path removed the
	// winner's socket, and the winner served no one (a test of concurrent
	// runs).
	if st, err := os.Lstat(s.addr); s.network == "unix" && err == nil && s.sock != nil && os.SameFile(st, s.sock) {
		os.Remove(s.addr)
	}
	if s.lock != nil {
		s.lock.Close()
		s.lock = nil
	}
}

// listen listens on addr, and gives a unix socket's file. A unix socket is
// bound and listening under a temporary name first, then linked into
// place, so that a trainer that waits for the file to appear never finds
// it before the sink listens (between bind and listen a connect is
// refused). A link, not a rename: two runs that both found the path free
// each renamed their socket onto it, one silently replacing the other's,
// whose run then waited for a trainer that could never reach it (a test
// of concurrent runs); a link fails where a file is.
func listen(network, addr string) (net.Listener, os.FileInfo, error) {
	if network != "unix" {
		ln, err := net.Listen(network, addr)
		return ln, nil, err
	}
	tmp := filepath.Join(filepath.Dir(addr), fmt.Sprintf(".%s.tmp-%d", filepath.Base(addr), os.Getpid()))
	if len(tmp) > maxUnixPath { // the temporary name is longer: bind in place
		ln, err := net.Listen(network, addr)
		if err != nil {
			return nil, nil, err
		}
		ln.(*net.UnixListener).SetUnlinkOnClose(false) // shut removes its own
		st, err := os.Lstat(addr)
		return ln, st, err
	}
	os.Remove(tmp)
	ln, err := net.Listen(network, tmp)
	if err != nil {
		return nil, nil, err
	}
	// The file gets another name; the sink removes it by that one (shut).
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	st, err := os.Lstat(tmp)
	if err == nil {
		err = os.Link(tmp, addr)
		if errors.Is(err, fs.ErrExist) {
			err = fmt.Errorf("another process serves at %s", addr)
		}
	}
	os.Remove(tmp)
	if err != nil {
		ln.Close()
		return nil, nil, err
	}
	return ln, st, nil
}
