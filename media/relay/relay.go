package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Errors of the relay.
var (
	// ErrNotAcceptable: the offer or answer cannot be bridged (no common
	// codec even with transcoding, no audio, unsupported transport, or an
	// unreadable SDP). The B2BUA answers 488 Not Acceptable Here. Code
	// that may not import this package finds the status with
	// errors.As(err, &x) for x of type interface{ SIPStatus() int }.
	ErrNotAcceptable error = statusError{"media/relay: not acceptable", 488}
	// ErrClosed: the relay has stopped, or the session is closed.
	ErrClosed = errors.New("media/relay: closed")
	// ErrNoOffer: Answer without a pending offer from the other leg.
	ErrNoOffer = errors.New("media/relay: answer without an offer from the other leg")
	// ErrRunning: a second concurrent Run.
	ErrRunning = errors.New("media/relay: already running")
)

// statusError is a sentinel that carries the SIP status it maps to.
type statusError struct {
	msg    string
	status int
}

func (e statusError) Error() string { return e.msg }

// SIPStatus is the response code for the failed offer (488).
func (e statusError) SIPStatus() int { return e.status }

// Relay anchors the media of calls: it owns the port range, the sessions
// and their goroutines.
type Relay struct {
	log   *slog.Logger
	ports *portPool
	start time.Time // monotonic base of packet arrival times
	wg    sync.WaitGroup

	mu       sync.Mutex
	cfg      Config
	sessions map[*Session]struct{}
	// endpoints are the media server connections (OpenEndpoint).
	endpoints map[*Endpoint]struct{}
	running   bool
	closed    bool
	done      Stats // counters of closed sessions and endpoints
	// portableReaders makes new sessions use readRTP/readRTCP even on
	// Linux, so that the tests cover the readers of other platforms.
	portableReaders bool

	polls pollSet // the pollers of sessions' sockets (Linux)
}

// New returns a Relay for cfg (zero fields = defaults). Sessions can be
// created at once; Run must run for inactivity detection and owns the
// shutdown.
func New(cfg Config, log *slog.Logger) (*Relay, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Relay{
		log:      log,
		ports:    newPortPool(c.PortMin, c.PortMax, c.SocketBuffer),
		start:    time.Now(),
		cfg:      c,
		sessions: map[*Session]struct{}{},
	}, nil
}

// Config returns the configuration in force, defaults filled in.
func (r *Relay) Config() Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.cfg
	c.Codecs = append([]string(nil), c.Codecs...)
	return c
}

// Reconfigure replaces the configuration. The port range applies to ports
// allocated from now on, everything else to sessions created from now on;
// sessions in progress keep what they have. On error nothing changes.
func (r *Relay) Reconfigure(cfg Config) error {
	c, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.cfg = c
	r.mu.Unlock()
	r.ports.setRange(c.PortMin, c.PortMax, c.SocketBuffer)
	return nil
}

// Run checks the sessions for inactivity until ctx ends, then closes every
// session and waits for all goroutines of the relay. It returns nil after
// a clean stop; the Relay cannot be used afterwards.
func (r *Relay) Run(ctx context.Context) error {
	r.mu.Lock()
	if r.running || r.closed {
		r.mu.Unlock()
		if r.closed {
			return ErrClosed
		}
		return ErrRunning
	}
	r.running = true
	r.mu.Unlock()

	tick := time.NewTicker(scanInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			r.shutdown()
			return nil
		case now := <-tick.C:
			r.scan(now)
		}
	}
}

// scanInterval is how often silent legs are looked for; a timeout fires
// between InactivityTimeout and InactivityTimeout + scanInterval.
const scanInterval = 100 * time.Millisecond

func (r *Relay) scan(now time.Time) {
	r.mu.Lock()
	list := make([]*Session, 0, len(r.sessions))
	for s := range r.sessions {
		list = append(list, s)
	}
	r.mu.Unlock()
	for _, s := range list {
		if reason, ok := s.checkInactive(now); ok {
			cb := s.onInactive
			r.log.Info("media/relay: session inactive", "session", s.id, "reason", reason)
			if cb != nil {
				r.wg.Go(func() { cb(reason) })
			}
		}
	}
	r.scanEndpoints(now)
}

func (r *Relay) shutdown() {
	r.mu.Lock()
	r.closed = true
	list := make([]*Session, 0, len(r.sessions))
	for s := range r.sessions {
		list = append(list, s)
	}
	r.mu.Unlock()
	for _, s := range list {
		s.Close()
	}
	for _, e := range r.endpointList() {
		e.Close()
	}
	r.wg.Wait()
}

// PortsInUse returns the number of UDP ports (RTP and RTCP) bound.
func (r *Relay) PortsInUse() int { return r.ports.inUseCount() }

// Stats are the relay's counters for metrics. Per-direction arrays are
// indexed by the leg the media came from (Stats.Packets[A] = A → B).
type Stats struct {
	Sessions   int       // active sessions
	PortsInUse int       // UDP ports bound
	Packets    [2]uint64 // RTP packets received and accepted per source leg
	Bytes      [2]uint64
	Relayed    [2]uint64 // RTP packets sent on to the other leg
	Lost       [2]int64  // RFC 3550 cumulative lost, per source leg
	RTCP       [2]uint64 // RTCP packets relayed
	Refused    uint64    // packets refused by the latching policy
	Dropped    uint64    // packets accepted but not relayed (hold, no peer yet, not RTP)
	// SRTPAuthFailures counts SRTP/SRTCP packets dropped because they did
	// not authenticate.
	SRTPAuthFailures uint64
	// EndpointPackets counts RTP packets accepted by media server
	// endpoints (OpenEndpoint), open and closed: like Packets, it never
	// goes down, so a sampler can take rates from it.
	EndpointPackets uint64
}

// TotalPackets is every RTP packet the relay accepted, sessions and
// endpoints, since it started (monotonic).
func (s Stats) TotalPackets() uint64 {
	return s.Packets[0] + s.Packets[1] + s.EndpointPackets
}

func (s *Stats) add(ls [2]LegStats) {
	for i, l := range ls {
		s.Packets[i] += l.Packets
		s.Bytes[i] += l.Bytes
		s.Relayed[i] += l.Relayed
		s.Lost[i] += l.Lost
		s.RTCP[i] += l.RTCP
		s.Refused += l.Refused
		s.Dropped += l.Dropped
		s.SRTPAuthFailures += l.SRTPAuthFailures
	}
}

// Stats returns the counters of active and closed sessions together.
func (r *Relay) Stats() Stats {
	r.mu.Lock()
	st := r.done
	list := make([]*Session, 0, len(r.sessions))
	for s := range r.sessions {
		list = append(list, s)
	}
	eps := make([]*Endpoint, 0, len(r.endpoints))
	for e := range r.endpoints {
		eps = append(eps, e)
	}
	r.mu.Unlock()
	for _, s := range list {
		st.add(s.Stats())
		for _, x := range s.Streams() {
			st.add(x.Legs)
		}
	}
	for _, e := range eps {
		st.EndpointPackets += e.rtpIn.Load()
	}
	st.Sessions = len(list)
	st.PortsInUse = r.PortsInUse()
	return st
}

func (r *Relay) addSession(s *Session) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	r.sessions[s] = struct{}{}
	return nil
}

func (r *Relay) removeSession(s *Session, final [2]LegStats, streams []StreamStats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.sessions[s]; ok {
		delete(r.sessions, s)
		r.done.add(final)
		for _, x := range streams {
			r.done.add(x.Legs)
		}
	}
}

// nowNs is the arrival clock of the forwarding path.
func (r *Relay) nowNs() int64 { return int64(time.Since(r.start)) }

func (r *Relay) errorf(format string, args ...any) error {
	return fmt.Errorf("media/relay: "+format, args...)
}
