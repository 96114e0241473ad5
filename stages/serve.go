package stages

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/serve"
	"github.com/piperun/piperun/spec"
)

// ServeConfig configures the serve sink.
type ServeConfig struct {
	Listen string `yaml:"listen" jsonschema:"required" jsonschema_description:"Where trainers connect: unix:///path/to.sock (a relative path resolves against the spec's directory) or tcp://HOST:PORT. One trainer is served at a time; the next to connect takes over when it leaves."`
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

// address resolves a unix socket path against the spec's directory.
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
			cc.Errorf("listen", "%v", err)
		}
	default:
		// The port may be taken (by a run serving there now) or the host
		// not this machine's: try it.
		ln, err := net.Listen(network, addr)
		if err != nil {
			cc.Errorf("listen", "cannot listen on %s: %v", c.Listen, errors.Unwrap(err))
		} else {
			ln.Close()
		}
	}
	return sample.Schema{}
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
	ln      net.Listener
	conn    net.Conn
	hello   []byte
	waiting bool
	// pending are connections accepted but not yet served: some still
	// greeting, some greeted and waiting for the trainer before them.
	pending []*pendingConn
	// sent counts samples written whole to a trainer, in all and in the
	// current epoch.
	sent, epochSent int64
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
	if network == "unix" {
		if err := staleSocket(addr); err != nil {
			return nil, err
		}
		os.Remove(addr) // a dead socket from a run that crashed
		if err := os.MkdirAll(filepath.Dir(addr), 0o755); err != nil {
			return nil, fmt.Errorf("listen on %s: %w", c.Listen, err)
		}
	}
	ln, err := listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", c.Listen, err)
	}
	hello, err := serve.EncodeJSON(serve.KindHello, serve.Hello{Protocol: 1, Pipeline: env.Spec.Name, Stage: env.Stage.Name, Seed: env.Seed, Epochs: env.Spec.Epochs})
	if err != nil {
		ln.Close()
		if network == "unix" {
			os.Remove(addr)
		}
		return nil, err
	}
	// Say where trainers connect: the absolute socket path, the port where
	// the spec asked for 0.
	listen := network + "://" + ln.Addr().String()
	if network == "unix" {
		listen = network + "://" + addr // not the name it was bound under
	}
	return &serveSink{log: env.Log, listen: listen, network: network, addr: addr, ln: ln, hello: hello}, nil
}

// connect waits for a trainer unless one is connected, and greets it.
// Connections are accepted and their greetings read without waiting on
// any one of them, so a client that connects and says nothing (a stalled
// probe) holds up no trainer: it is closed after greetWithin.
func (s *serveSink) connect(ctx context.Context) error {
	for s.conn == nil {
		if !s.waiting {
			s.waiting = true
			s.log.Info("waiting for a trainer to connect", zap.String("listen", s.listen))
		}
		if d, ok := s.ln.(interface{ SetDeadline(time.Time) error }); ok {
			d.SetDeadline(time.Now().Add(acceptEvery))
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
		c = s.greeted()
		if c == nil {
			continue
		}
		s.waiting = false
		if err := s.write(ctx, c, net.Buffers{s.hello}); err != nil {
			c.Close()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s.log.Warn("trainer left before the hello", zap.Error(err))
			continue
		}
		s.conn = c
		if s.network == "tcp" {
			s.log.Info("trainer connected", zap.String("from", c.RemoteAddr().String()))
		} else {
			s.log.Info("trainer connected")
		}
	}
	return nil
}

// acceptEvery is how long connect waits for a connection before it looks
// at the greetings of those it has.
const acceptEvery = 20 * time.Millisecond

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
// read. Its error is the connection's, or ctx's.
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
		return err
	}
	return nil
}

// send writes one frame to a trainer. A trainer that leaves mid-frame gets
// nothing of it; the frame goes whole to the next one that connects.
func (s *serveSink) send(ctx context.Context, frame func() (net.Buffers, error)) error {
	for {
		if err := s.connect(ctx); err != nil {
			return err
		}
		bufs, err := frame()
		if err != nil {
			return err
		}
		err = s.write(ctx, s.conn, bufs)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.log.Warn("trainer left; the next to connect gets the rest", zap.Error(err), zap.Int64("frames_sent", s.sent))
		s.conn.Close()
		s.conn = nil
	}
}

func (s *serveSink) Write(ctx context.Context, smp *sample.Sample) error {
	err := s.send(ctx, func() (net.Buffers, error) { return serve.EncodeSample(smp) })
	if err != nil {
		return err
	}
	s.sent++
	s.epochSent++
	smp.Recycle() // written: this sink was its last holder
	return nil
}

// EndEpoch tells the trainer the epoch is over.
func (s *serveSink) EndEpoch(ctx context.Context, epoch int, _ Emit) error {
	n := s.epochSent
	s.epochSent = 0
	return s.send(ctx, func() (net.Buffers, error) {
		b, err := serve.EncodeJSON(serve.KindEndOfEpoch, serve.EpochHeader{Epoch: epoch, Frames: n})
		return net.Buffers{b}, err
	})
}

// Commit sends the end of the stream to the trainer connected now. Every
// sample and every end of epoch has been written whole by then, so a
// trainer that has already left (it stopped after its last epoch, without
// reading the end of the stream) is no failure.
func (s *serveSink) Commit() error {
	defer s.shut()
	if s.conn == nil {
		return nil
	}
	b, err := serve.EncodeJSON(serve.KindEndOfStream, serve.EndHeader{Frames: s.sent})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.write(ctx, s.conn, net.Buffers{b}); err != nil {
		s.log.Warn("the trainer left before the end of the stream; it had been sent every sample", zap.Error(err), zap.Int64("frames_sent", s.sent))
	}
	return nil
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
		s.conn.Close()
		s.conn = nil
	}
	for _, p := range s.pending {
		p.c.Close()
	}
	s.pending = nil
	s.ln.Close()
	if s.network == "unix" {
		os.Remove(s.addr)
	}
}

// listen listens on addr. A unix socket is bound and listening under a
// temporary name first, then renamed into place, so that a trainer that
// waits for the file to appear never finds it before the sink listens
// (between bind and listen a connect is refused).
func listen(network, addr string) (net.Listener, error) {
	if network != "unix" {
		return net.Listen(network, addr)
	}
	tmp := filepath.Join(filepath.Dir(addr), fmt.Sprintf(".%s.tmp-%d", filepath.Base(addr), os.Getpid()))
	if len(tmp) > maxUnixPath { // the temporary name is longer: bind in place
		return net.Listen(network, addr)
	}
	os.Remove(tmp)
	ln, err := net.Listen(network, tmp)
	if err != nil {
		return nil, err
	}
	// The file moves; the sink removes it by its final name (shut).
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Rename(tmp, addr); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, err
	}
	return ln, nil
}
