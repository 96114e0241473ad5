// Package gpu watches the NVIDIA GPUs of the machine while a pipeline runs,
// through NVML, to tell whether a trainer on them waited for data: a GPU
// that a process is using but that runs kernels only part of the time is
// starving (or its model is too small to keep it busy). It imports nothing
// of piperun's; the CLI starts a Monitor next to a run and puts its Summary
// in the report.
package gpu

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// StarvedBelow is the utilization, in percent, under which a reading counts
// as starved: NVML's utilization is the share of its last sample period
// (1/6 s to 1 s) in which a kernel ran, and a fed training loop keeps it
// near 100.
const StarvedBelow = 50

// StarvedShare is the share of a used device's readings that must be
// starved for the Summary to call the device starving.
const StarvedShare = 0.5

// ErrUnavailable is wrapped by the error Open returns where NVML cannot be
// used: no NVIDIA driver, or a build without cgo.
var ErrUnavailable = errors.New("nvml unavailable")

// ErrNotSupported is wrapped by a Read error for a device that gives no
// utilization.
var ErrNotSupported = errors.New("not supported")

// Device names one GPU.
type Device struct {
	Index       int
	Name        string
	UUID        string
	MemoryTotal uint64
}

// Reading is one look at one device.
type Reading struct {
	// Utilization is the percent of the last sample period in which a
	// kernel ran.
	Utilization uint32
	MemoryUsed  uint64
	// Processes is how many compute processes use the device; -1 where
	// the driver does not say.
	Processes int
}

// Source is what a Monitor reads: NVML (Open), or a fake in tests.
type Source interface {
	Devices() ([]Device, error)
	Read(index int) (Reading, error)
	Close() error
}

// Monitor collects readings of every device of a Source.
type Monitor struct {
	src     Source
	devices []Device

	mu     sync.Mutex
	stats  []deviceStats
	errors int
	lastEr error
	// reading is the index in devices of the device being read, -1
	// between reads: a Stop that times out names it.
	reading int
}

type deviceStats struct {
	readings int
	sum      uint64
	min, max uint32
	memMax   uint64
	// used counts the readings in which a process used the device (or the
	// driver did not say); starved and usedSum are over those alone, so a
	// trainer that starts late is not judged by the time before it.
	used, starved int
	usedSum       uint64
	unlisted      bool
	errors        int
	lastErr       error
}

// NewMonitor lists src's devices; it fails when they cannot be listed.
func NewMonitor(src Source) (*Monitor, error) {
	ds, err := src.Devices()
	if err != nil {
		return nil, fmt.Errorf("list gpus: %w", err)
	}
	return &Monitor{src: src, devices: ds, stats: make([]deviceStats, len(ds)), reading: -1}, nil
}

// Sample takes one reading of every device. A device that cannot be read
// is counted, not fatal: the run it watches matters more.
func (m *Monitor) Sample() {
	for i, d := range m.devices {
		m.mu.Lock()
		m.reading = i
		m.mu.Unlock()
		r, err := m.src.Read(d.Index)
		m.mu.Lock()
		m.reading = -1
		if err != nil {
			m.errors++
			m.lastEr = fmt.Errorf("gpu %d: %w", d.Index, err)
			m.stats[i].errors++
			m.stats[i].lastErr = err
			m.mu.Unlock()
			continue
		}
		s := &m.stats[i]
		if s.readings == 0 || r.Utilization < s.min {
			s.min = r.Utilization
		}
		s.max = max(s.max, r.Utilization)
		s.readings++
		s.sum += uint64(r.Utilization)
		if r.Processes != 0 {
			s.used++
			s.usedSum += uint64(r.Utilization)
			if r.Utilization < StarvedBelow {
				s.starved++
			}
			s.unlisted = s.unlisted || r.Processes < 0
		}
		s.memMax = max(s.memMax, r.MemoryUsed)
		m.mu.Unlock()
	}
}

// Run samples at once, then every interval until ctx ends.
func (m *Monitor) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	m.Sample()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.Sample()
		}
	}
}

// Summary is what the report says of the GPUs (its "gpu" key).
type Summary struct {
	// Available is false where NVML could not be used; Why says why.
	Available bool            `json:"available"`
	Why       string          `json:"why,omitempty"`
	Devices   []DeviceSummary `json:"devices,omitempty"`
	// Starving is true when some device was starved (under StarvedBelow
	// percent busy) in at least StarvedShare of the readings in which a
	// process used it (or the driver did not say).
	Starving bool `json:"starving"`
	// Verdict says the same in words.
	Verdict string `json:"verdict,omitempty"`
	// HeldBackBy says, for a starving device fed by the run's serve sinks
	// (Attribute), what kept it waiting: "pipeline", "trainer" or "both".
	HeldBackBy    string `json:"held_back_by,omitempty"`
	ReadErrors    int    `json:"read_errors,omitempty"`
	LastReadError string `json:"last_read_error,omitempty"`

	// starved is the verdict's account of the starving devices, and
	// notes what it adds (the devices that gave no reading, a monitor
	// that did not stop), which Attribute words again.
	starved, notes string
}

// PipelineBoundAt is the share of its time a serve sink must have waited
// for its next sample for a starving GPU to be put down, at least in part,
// to the pipeline: a trainer faster than its input keeps the sink waiting
// for most of it, one slower than its input keeps the sink's queue full
// and the sink waiting for almost none of it.
const PipelineBoundAt = 0.1

// Feed is what one of the run's serve sinks, a trainer's input, says of
// the run.
type Feed struct {
	Sink string
	// WaitedShare is the share of the sink's time, after its first
	// sample, that it waited for its next one.
	WaitedShare float64
}

// Attribute words a starving Summary's verdict again with what the serve
// sinks that fed the trainers saw, taking the one that waited most: one
// trainer per run is assumed, or trainers alike, since a feed is not tied
// to a device. When the sink waited less than PipelineBoundAt of its time
// the trainer held the GPU back (HeldBackBy "trainer": its steps are too
// small for the GPU, or spend their time on the CPU). Otherwise the
// trainer's steps would have run back to back had the pipeline kept up,
// so a starving device's busy share while used, over 1 - WaitedShare, is
// about what it would have reached: at least StarvedBelow, the pipeline
// held it back ("pipeline"); under it, both did ("both"). It does nothing
// to a Summary that is not starving, or without feeds: a run with no serve
// sink did not feed the GPU's process, so it cannot say.
func (s *Summary) Attribute(feeds []Feed) {
	if !s.Starving || len(feeds) == 0 {
		return
	}
	most := feeds[0]
	for _, f := range feeds[1:] {
		if f.WaitedShare > most.WaitedShare {
			most = f
		}
	}
	waited := fmt.Sprintf("serve sink %q waited for its next sample %.0f%% of its time", most.Sink, 100*most.WaitedShare)
	if most.WaitedShare < PipelineBoundAt {
		s.HeldBackBy = "trainer"
		s.Verdict = fmt.Sprintf("starving: %s; not the pipeline: %s, so the trainer took samples as fast as it could: "+
			"its steps are too small to keep the GPU busy, or spend their time on the CPU%s", s.starved, waited, s.notes)
		return
	}
	fed := 100.0
	for _, d := range s.Devices {
		if d.UsedReadings > 0 && d.StarvedShare >= StarvedShare && most.WaitedShare < 1 {
			fed = min(fed, d.UsedUtilizationMeanPct/(1-most.WaitedShare))
		}
	}
	if fed >= StarvedBelow {
		s.HeldBackBy = "pipeline"
		s.Verdict = fmt.Sprintf("starving: %s; the pipeline held it back: %s, and had it kept up the GPU would have been "+
			"about %.0f%% busy (piperun bench names the slowest stage)%s", s.starved, waited, fed, s.notes)
		return
	}
	s.HeldBackBy = "both"
	s.Verdict = fmt.Sprintf("starving: %s; the pipeline held it back only in part: %s, but had it kept up the GPU would "+
		"still have been only about %.0f%% busy: the trainer's steps are too small to keep it busy, or spend their time "+
		"on the CPU%s", s.starved, waited, fed, s.notes)
}

// DeviceSummary is one device's readings over the run.
type DeviceSummary struct {
	Index    int    `json:"index"`
	Name     string `json:"name"`
	UUID     string `json:"uuid,omitempty"`
	Readings int    `json:"readings"`
	// UsedReadings counts the readings in which a process used the device
	// (or the driver did not list its processes).
	UsedReadings       int     `json:"used_readings"`
	UtilizationMeanPct float64 `json:"utilization_mean_pct"`
	UtilizationMinPct  uint32  `json:"utilization_min_pct"`
	UtilizationMaxPct  uint32  `json:"utilization_max_pct"`
	// UsedUtilizationMeanPct and StarvedShare are over the used readings:
	// the mean, and the share under StarvedBelow percent.
	UsedUtilizationMeanPct float64 `json:"used_utilization_mean_pct"`
	StarvedShare           float64 `json:"starved_share"`
	MemoryUsedMaxBytes     uint64  `json:"memory_used_max_bytes"`
	MemoryTotalBytes       uint64  `json:"memory_total_bytes"`
	ReadErrors             int     `json:"read_errors,omitempty"`
}

// Summary sums up the readings so far.
func (m *Monitor) Summary() *Summary {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := &Summary{Available: true, ReadErrors: m.errors}
	if m.lastEr != nil {
		out.LastReadError = m.lastEr.Error()
	}
	var starving, used, unread []string
	for i, d := range m.devices {
		s := m.stats[i]
		ds := DeviceSummary{Index: d.Index, Name: d.Name, UUID: d.UUID, Readings: s.readings, UsedReadings: s.used,
			UtilizationMinPct: s.min, UtilizationMaxPct: s.max, MemoryUsedMaxBytes: s.memMax, MemoryTotalBytes: d.MemoryTotal,
			ReadErrors: s.errors}
		if s.readings > 0 {
			ds.UtilizationMeanPct = float64(s.sum) / float64(s.readings)
		} else if s.errors > 0 {
			unread = append(unread, fmt.Sprintf("%s: %v", d.label(), s.lastErr))
		}
		out.Devices = append(out.Devices, ds)
		if s.used == 0 {
			continue
		}
		ds.UsedUtilizationMeanPct = float64(s.usedSum) / float64(s.used)
		ds.StarvedShare = float64(s.starved) / float64(s.used)
		out.Devices[len(out.Devices)-1] = ds
		while := "while a process used it"
		if s.unlisted {
			while = "while it may have been in use (the driver does not list its processes)"
		}
		desc := fmt.Sprintf("%s under %d%% busy in %d of %d readings %s, %.0f%% on average then",
			d.label(), StarvedBelow, s.starved, s.used, while, ds.UsedUtilizationMeanPct)
		if ds.StarvedShare >= StarvedShare {
			starving = append(starving, desc)
		} else {
			used = append(used, desc)
		}
	}
	switch {
	case len(m.devices) == 0:
		out.Verdict = "no gpu found"
	case len(starving) > 0:
		out.Starving = true
		out.starved = joinAnd(starving)
		out.Verdict = fmt.Sprintf("starving: %s; it waited for input, or its work is too small to keep it busy", out.starved)
	case len(used) > 0:
		out.Verdict = fmt.Sprintf("fed: %s", joinAnd(used))
	case len(unread) == len(m.devices):
		out.Verdict = "no gpu could be read: " + joinAnd(unread)
		return out
	default:
		out.Verdict = "no process used a gpu during the run"
	}
	if len(unread) > 0 {
		out.notes = "; could not read " + joinAnd(unread)
		out.Verdict += out.notes
	}
	return out
}

// label names d in a verdict: its index, and its name where NVML gave
// one (a device it would not open has none).
func (d Device) label() string {
	if d.Name == "" {
		return fmt.Sprintf("gpu %d", d.Index)
	}
	return fmt.Sprintf("gpu %d (%s)", d.Index, d.Name)
}

// StopWait is how long Watching.Stop waits for the sampling to end: an
// NVML call can block for good on a GPU in a bad state, and the run the
// monitor watched is over by then.
const StopWait = 2 * time.Second

// Watching is a Monitor sampling in a goroutine of its own (Watch).
type Watching struct {
	m      *Monitor
	cancel context.CancelFunc
	done   chan struct{}
	// closeErr is the source's Close error, set before done closes.
	closeErr error
}

// Watch samples m at once, then every interval, in a goroutine of its
// own until Stop.
func (m *Monitor) Watch(every time.Duration) *Watching {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watching{m: m, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		m.Run(ctx, every)
		// A run shorter than the interval still gets a reading at its
		// end. Taken here, with the close, so that Stop's limit covers
		// them: either can hang as any NVML call can.
		m.Sample()
		w.closeErr = m.Close()
	}()
	return w
}

// Stop ends the sampling, which takes a last sample and closes the
// source, and sums up; the error is the close's. When that has not ended
// within wait, an NVML call hangs: Stop sums up the readings so far and
// says so in the verdict, leaving the hung call to the goroutine that
// made it.
func (w *Watching) Stop(wait time.Duration) (*Summary, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	return w.stopWhen(wait, t.C)
}

// stopWhen is Stop, giving up when timeout fires: a test fires it once a
// read hangs, where a timer could fire before the read began.
func (w *Watching) stopWhen(wait time.Duration, timeout <-chan time.Time) (*Summary, error) {
	w.cancel()
	select {
	case <-w.done:
		return w.m.Summary(), w.closeErr
	case <-timeout:
		return w.m.stalled(wait), nil
	}
}

// stalled is the Summary of a Monitor whose read did not return within
// wait after the run.
func (m *Monitor) stalled(wait time.Duration) *Summary {
	s := m.Summary()
	m.mu.Lock()
	which := "the close of NVML"
	if m.reading >= 0 {
		which = "the read of " + m.devices[m.reading].label()
	}
	m.mu.Unlock()
	note := fmt.Sprintf("; the monitor did not stop within %v of the run's end: %s had not returned "+
		"(an NVML call can hang on a GPU in a bad state), so these are the readings before it", wait, which)
	s.notes += note
	s.Verdict += note
	return s
}

// Unavailable is the Summary of a run that could not watch the GPUs.
func Unavailable(err error) *Summary {
	return &Summary{Available: false, Why: err.Error()}
}

// Close closes the Source.
func (m *Monitor) Close() error { return m.src.Close() }

func joinAnd(parts []string) string {
	switch len(parts) {
	case 1:
		return parts[0]
	case 2:
		return parts[0] + " and " + parts[1]
	}
	out := ""
	for i, p := range parts {
		switch {
		case i == len(parts)-1:
			out += ", and " + p
		case i > 0:
			out += ", " + p
		default:
			out = p
		}
	}
	return out
}
