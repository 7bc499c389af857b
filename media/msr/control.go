package msr

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Control-channel limits. The channel is the softswitch's alone: a peer
// that is not one of the servers (or of Config.ControlAllow) is refused
// before anything is read, and the limits below keep allowed peers that
// misbehave (or an allowed range's other hosts) from locking it out.
const (
	// maxChannels bounds the connections of all sources together; more are
	// closed at once.
	maxChannels = 16
	// maxChannelsPerSource bounds the connections of one source address,
	// so that no single source can take the maxChannels slots.
	// The softswitch needs one channel (RFC 6230 sets up one control
	// channel between a client and a server); a reconnect overlapping the
	// dead channel it replaces, and a second node of a softswitch cluster
	// behind the same address, still fit in 4.
	maxChannelsPerSource = 4
	writeTimeout         = 5 * time.Second // one response
	// minKeepAlive and maxKeepAlive bound the Keep-Alive a SYNC may set
	// (RFC 6230: the client names the interval, in seconds). Above the
	// maximum a peer that vanished without a FIN would hold its channel
	// (and a per-source slot) that long: ten minutes is twice this
	// agent's default REGISTER refresh. Below the minimum one retransmitted
	// TCP segment (initial RTO 1 s, RFC 6298 §2) could drop a healthy
	// channel; a longer wait than asked costs nothing, since the peer still
	// sends at its own pace.
	minKeepAlive = 5 * time.Second
	maxKeepAlive = 600 * time.Second
	// refusalLogEvery: a refused or over-cap source is logged at most
	// once per this period; the counters count every connection.
	refusalLogEvery = time.Minute
	// maxLoggedSources bounds the sources the refusal log remembers (an
	// IPv6 scanner has plenty); beyond it refusals are counted, not logged,
	// until entries expire.
	maxLoggedSources = 1024
)

// ChannelStatus is one control-channel connection.
type ChannelStatus struct {
	Remote   netip.AddrPort `json:"remote"`
	Since    time.Time      `json:"since"`
	Synced   bool           `json:"synced"`
	DialogID string         `json:"dialog_id,omitempty"`
	// Bound: the Dialog-ID is the cfw-id of a control dialog set up by
	// INVITE (RFC 6230 §5); the channel closes when that dialog ends.
	// False for a direct channel (no INVITE, as ECSS-10 connects).
	Bound     bool          `json:"bound,omitempty"`
	Packages  []string      `json:"packages,omitempty"` // what the client asked for in SYNC
	KeepAlive time.Duration `json:"keep_alive"`
	LastRecv  time.Time     `json:"last_recv"`
	Requests  uint64        `json:"requests"`
}

// ControlStatus is the control-channel listener and its connections.
type ControlStatus struct {
	Listen   netip.AddrPort  `json:"listen,omitzero"` // zero when not listening
	Error    string          `json:"error,omitempty"` // why not listening
	Accepted uint64          `json:"accepted"`
	Refused  uint64          `json:"refused"` // closed unread: the source is neither a server nor in Config.ControlAllow
	Dropped  uint64          `json:"dropped"` // closed for overload, no SYNC in time, keep-alive timeout or bad framing
	Channels []ChannelStatus `json:"channels"`
}

// controlServer is the RFC 6230 control-channel listener on the service
// address: it accepts the softswitch's media-control connection, answers
// SYNC (200, echoing Keep-Alive; Dialog-ID required) and K-ALIVE (200),
// and drops a channel on which nothing arrives for the keep-alive
// interval, or whose framing is broken.
//
// Decisions, RFC 6230 §6: the softswitch connects, so it is the active
// side and sends SYNC and the keep-alives; this side answers and watches
// the timer (no K-ALIVE of its own). Before SYNC the keep-alive is
// Config.ControlKeepAlive; a SYNC without Keep-Alive is accepted with
// that value rather than refused. SYNC's Dialog-ID is looked up among the
// control dialogs (mediaServer.controlDialog: 481 when unknown and
// params.requireDialog); CONTROL goes to the msc-mixer package (control);
// REPORT (sent by servers) and unknown methods get 405, anything before
// SYNC 406 (out of sequence).
//
// Who may connect: a source that the current controlAllow set does not
// name is closed unread. At most params.perSource connections per source
// address and params.total in all; a connection without a successful
// SYNC by params.syncTimeout after it was accepted is closed, however
// much else it sends.
type controlServer struct {
	ln   net.Listener
	addr netip.AddrPort
	log  *slog.Logger
	// allow is replaced by the agent's loop whenever the servers resolve
	// anew or the configuration changes; accept only loads it, so no lock
	// of the loop's (or the resolver's) can hold up accepting.
	allow atomic.Pointer[controlAllow]
	// ms serves the msc-mixer package (nil: no package, CONTROL is 420).
	ms *mediaServer
	// refusals is touched by the accept goroutine only.
	refusals logLimit

	mu        sync.Mutex
	p         controlParams
	conns     map[*ctlConn]struct{}
	perSource map[netip.Addr]int
	accepted  uint64
	refused   uint64
	dropped   uint64
	closed    bool
	wg        sync.WaitGroup
}

// controlParams are the control server's timers and limits: the defaults
// (defaultControlParams) outside tests.
type controlParams struct {
	keepAlive    time.Duration // before SYNC, and for a SYNC without Keep-Alive
	syncTimeout  time.Duration // from accept to a successful SYNC
	total        int           // connections in all
	perSource    int           // connections per source address
	minKA, maxKA time.Duration // bounds of a SYNC's Keep-Alive
	// requireDialog: a SYNC must name a control dialog (else 481);
	// Config.ControlDialogRequired.
	requireDialog bool
}

func defaultControlParams(keepAlive, syncTimeout time.Duration, requireDialog bool) controlParams {
	return controlParams{keepAlive: keepAlive, syncTimeout: syncTimeout, requireDialog: requireDialog,
		total: maxChannels, perSource: maxChannelsPerSource, minKA: minKeepAlive, maxKA: maxKeepAlive}
}

type ctlConn struct {
	c      net.Conn
	src    netip.Addr    // the source address (unmapped, no zone): the per-source key
	syncBy time.Time     // the SYNC deadline
	st     ChannelStatus // guarded by controlServer.mu
}

// controlAllow is who may open a control channel: every address the
// configured servers resolved to (any port: the softswitch connects from
// an ephemeral one) and the configured ranges. A published value is never
// modified; a nil one allows nobody.
type controlAllow struct {
	addrs  map[netip.Addr]struct{}
	ranges []netip.Prefix // masked
}

func newControlAllow(targets []target, ranges []netip.Prefix) *controlAllow {
	a := &controlAllow{addrs: make(map[netip.Addr]struct{}, len(targets))}
	for _, t := range targets {
		a.addrs[sourceAddr(t.addr.Addr())] = struct{}{}
	}
	for _, p := range ranges {
		if p.IsValid() {
			a.ranges = append(a.ranges, p.Masked())
		}
	}
	return a
}

// sourceAddr is ip as the allowed set and the per-source count key it:
// an IPv4-mapped address (a dual-stack socket's view) as IPv4, no zone.
func sourceAddr(ip netip.Addr) netip.Addr { return ip.Unmap().WithZone("") }

func (a *controlAllow) allows(ip netip.Addr) bool {
	if a == nil {
		return false
	}
	ip = sourceAddr(ip)
	if _, ok := a.addrs[ip]; ok {
		return true
	}
	for _, p := range a.ranges {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// logLimit says whether a source may be logged now: once per
// refusalLogEvery, for at most maxLoggedSources sources at a time. Not
// safe for concurrent use.
type logLimit struct {
	last map[netip.Addr]time.Time
	// prune is when the oldest remembered source expires: a full map is
	// not scanned again before, so a flood of new sources costs one scan
	// per refusalLogEvery, not one per connection.
	prune time.Time
}

func (l *logLimit) allow(a netip.Addr, now time.Time) bool {
	t, seen := l.last[a]
	if seen && now.Sub(t) < refusalLogEvery {
		return false
	}
	if l.last == nil {
		l.last = map[netip.Addr]time.Time{}
	}
	if !seen && len(l.last) >= maxLoggedSources {
		if now.Before(l.prune) {
			return false
		}
		oldest := now
		maps.DeleteFunc(l.last, func(_ netip.Addr, t time.Time) bool {
			if now.Sub(t) >= refusalLogEvery {
				return true
			}
			if t.Before(oldest) {
				oldest = t
			}
			return false
		})
		l.prune = oldest.Add(refusalLogEvery)
		if len(l.last) >= maxLoggedSources {
			return false
		}
	}
	l.last[a] = now
	return true
}

func listenControl(ctx context.Context, socks Sockets, addr netip.AddrPort, p controlParams, allow *controlAllow, ms *mediaServer, log *slog.Logger) (*controlServer, error) {
	ln, err := socks.Listen(ctx, "tcp", addr.String())
	if err != nil {
		return nil, fmt.Errorf("media/msr: control channel listen %v: %w", addr, err)
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); ok {
		addr = netip.AddrPortFrom(addr.Addr(), uint16(ta.Port))
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &controlServer{ln: ln, addr: addr, p: p, log: log, ms: ms, conns: map[*ctlConn]struct{}{}, perSource: map[netip.Addr]int{}}
	s.allow.Store(allow)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.accept()
	}()
	return s, nil
}

// setAllow replaces the allowed sources for connections accepted from now
// on; channels already open stay.
func (s *controlServer) setAllow(a *controlAllow) { s.allow.Store(a) }

func (s *controlServer) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed
		}
		var remote netip.AddrPort
		if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			remote = ta.AddrPort()
		}
		src := sourceAddr(remote.Addr())
		// Not a server's: closed before anything is read, so a stranger
		// learns nothing but that the port is open.
		if !s.allow.Load().allows(src) {
			s.mu.Lock()
			s.refused++
			s.mu.Unlock()
			s.refuse(c, src, "control channel refused: not a server's address")
			continue
		}
		s.mu.Lock()
		var why string
		switch {
		case s.closed:
		case s.perSource[src] >= s.p.perSource:
			why = "control channel refused: too many connections from this source"
		case len(s.conns) >= s.p.total:
			why = "control channel refused: too many connections"
		}
		if s.closed || why != "" {
			s.dropped++
			s.mu.Unlock()
			s.refuse(c, src, why)
			continue
		}
		now := time.Now()
		cc := &ctlConn{c: c, src: src, syncBy: now.Add(s.p.syncTimeout),
			st: ChannelStatus{Remote: remote, Since: now, LastRecv: now, KeepAlive: s.p.keepAlive}}
		s.conns[cc] = struct{}{}
		s.perSource[src]++
		s.accepted++
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serve(cc)
		}()
	}
}

// refuse closes c, first logging why (if why is set and src has not been
// logged within refusalLogEvery). Logging before the close lets whoever
// sees the close see the log too.
func (s *controlServer) refuse(c net.Conn, src netip.Addr, why string) {
	if why != "" && s.refusals.allow(src, time.Now()) {
		s.log.Warn("media/msr: "+why, "remote", src, "quiet_for", refusalLogEvery)
	}
	_ = c.Close()
}

// close stops listening, closes every channel and waits for their
// goroutines. Idempotent.
func (s *controlServer) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	_ = s.ln.Close()
	for c := range s.conns {
		_ = c.c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// setTimers changes the keep-alive and the SYNC deadline of channels
// accepted from now on, and whether a SYNC must name a control dialog
// (for SYNCs from now on).
func (s *controlServer) setTimers(keepAlive, syncTimeout time.Duration, requireDialog bool) {
	s.mu.Lock()
	s.p.keepAlive, s.p.syncTimeout, s.p.requireDialog = keepAlive, syncTimeout, requireDialog
	s.mu.Unlock()
}

// dropDialog closes the channels bound to the control dialog id (its SIP
// dialog ended: RFC 6230 §5, the channel lives as long as the dialog).
func (s *controlServer) dropDialog(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.st.Bound && c.st.DialogID == id {
			_ = c.c.Close()
		}
	}
}

func (s *controlServer) status() ControlStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := ControlStatus{Listen: s.addr, Accepted: s.accepted, Refused: s.refused, Dropped: s.dropped}
	for c := range s.conns {
		cs := c.st
		cs.Packages = slices.Clone(cs.Packages)
		st.Channels = append(st.Channels, cs)
	}
	slices.SortFunc(st.Channels, func(a, b ChannelStatus) int { return a.Since.Compare(b.Since) })
	return st
}

// serve runs one channel until it ends: EOF, keep-alive timeout, broken
// framing, a write failure or close.
func (s *controlServer) serve(cc *ctlConn) {
	log := s.log.With("remote", cc.st.Remote)
	var reason string
	defer func() {
		// Book-keeping first: whoever sees the close sees the status too.
		s.mu.Lock()
		delete(s.conns, cc)
		if s.perSource[cc.src]--; s.perSource[cc.src] <= 0 {
			delete(s.perSource, cc.src)
		}
		closed := s.closed
		if reason != "" && !closed {
			s.dropped++
		}
		s.mu.Unlock()
		_ = cc.c.Close()
		if reason != "" && !closed {
			log.Info("media/msr: control channel dropped", "reason", reason)
		}
	}()
	r := bufio.NewReader(cc.c)
	for {
		s.mu.Lock()
		ka, synced := cc.st.KeepAlive, cc.st.Synced
		s.mu.Unlock()
		// RFC 6230 §6.2: nothing received for the keep-alive interval
		// means the channel is dead. Until SYNC succeeds the deadline is
		// also bounded by syncBy, which no traffic moves.
		deadline := time.Now().Add(ka)
		syncDue := !synced && !deadline.Before(cc.syncBy)
		if syncDue {
			deadline = cc.syncBy
		}
		_ = cc.c.SetReadDeadline(deadline)
		f, err := ReadFrame(r)
		if err != nil {
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded) && syncDue:
				reason = "no SYNC in time"
			case errors.Is(err, os.ErrDeadlineExceeded):
				reason = "keep-alive timeout"
			case errors.Is(err, ErrFrame):
				reason = err.Error()
			case errors.Is(err, net.ErrClosed):
			default:
				if !errors.Is(err, io.EOF) {
					reason = err.Error()
				}
			}
			return
		}
		s.mu.Lock()
		cc.st.LastRecv = time.Now()
		s.mu.Unlock()
		if f.Method == "" {
			continue // a response: we send no requests, but it is traffic
		}
		var res *Frame
		if f.Method == "CONTROL" {
			res = s.control(cc, f)
		} else {
			res = s.handle(cc, f)
		}
		_ = cc.c.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := cc.c.Write(res.Marshal()); err != nil {
			reason = "write: " + err.Error()
			return
		}
	}
}

// control answers a CONTROL request (RFC 6230 §9.3): 406 before SYNC,
// 400 without Control-Package, 420 for a package that is not served or
// was not asked for in SYNC, else 200 with the package's response body
// (errors of the package travel inside it, RFC 6505 §4.6).
func (s *controlServer) control(cc *ctlConn, f *Frame) *Frame {
	res := &Frame{TransID: f.TransID}
	s.mu.Lock()
	cc.st.Requests++
	synced, pkgs := cc.st.Synced, cc.st.Packages
	s.mu.Unlock()
	if !synced {
		res.Status = 406
		return res
	}
	pkg, ok := f.Get("Control-Package")
	switch {
	case !ok || pkg == "":
		res.Status = 400
		return res
	case s.ms == nil || pkg != mixerPackage || len(pkgs) > 0 && !slices.Contains(pkgs, pkg):
		res.Status = 420
		if s.ms != nil {
			res.Header = []Field{{"Supported", mixerPackage}}
		}
		return res
	}
	if ct, ok := f.Get("Content-Type"); ok && !strings.EqualFold(strings.TrimSpace(strings.Split(ct, ";")[0]), mixerContentType) {
		res.Status = 400
		return res
	}
	res.Status = 200
	res.Header = []Field{{"Content-Type", mixerContentType}}
	res.Body = s.ms.mixer(f.Body)
	return res
}

// handle answers one request.
func (s *controlServer) handle(cc *ctlConn, f *Frame) *Frame {
	res := &Frame{TransID: f.TransID}
	s.mu.Lock()
	defer s.mu.Unlock()
	cc.st.Requests++
	if f.Method != "SYNC" && !cc.st.Synced {
		res.Status = 406 // out of sequence: SYNC comes first
		return res
	}
	switch f.Method {
	case "SYNC":
		dialog, _ := f.Get("Dialog-ID")
		if dialog == "" {
			res.Status = 400
			return res
		}
		// RFC 6230 §6: the Dialog-ID is the cfw-id of the dialog that set
		// up the channel; 481 when there is no such dialog (§8) unless
		// direct channels are allowed. ms.mu is taken under s.mu (never
		// the other way round).
		bound := s.ms != nil && s.ms.controlDialog(dialog)
		if !bound && s.p.requireDialog {
			res.Status = 481
			return res
		}
		ka := s.p.keepAlive
		if v, ok := f.Get("Keep-Alive"); ok {
			// Digits only, parsed saturating: 10^20 is simply large, and
			// large means maxKA.
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil && !errors.Is(err, strconv.ErrRange) || n == 0 && err == nil {
				res.Status = 400
				return res
			}
			ka = s.p.maxKA
			if n < uint64(s.p.maxKA/time.Second) {
				ka = max(time.Duration(n)*time.Second, s.p.minKA)
			}
		}
		var pkgs []string
		if v, ok := f.Get("Packages"); ok {
			for p := range strings.SplitSeq(v, ",") {
				if p = strings.TrimSpace(p); p != "" {
					pkgs = append(pkgs, p)
				}
			}
		}
		res.Header = []Field{{"Keep-Alive", strconv.Itoa(int(ka / time.Second))}}
		if s.ms != nil {
			// RFC 6230 §6.1: Packages says which of the asked packages
			// are in force, Supported what the server could offer; none
			// of the asked ones supported is 422.
			var ok []string
			for _, p := range pkgs {
				if p == mixerPackage {
					ok = append(ok, p)
				}
			}
			res.Header = append(res.Header, Field{"Supported", mixerPackage})
			if len(pkgs) > 0 && len(ok) == 0 {
				res.Status = 422
				return res
			}
			if len(ok) > 0 {
				res.Header = append(res.Header, Field{"Packages", strings.Join(ok, ",")})
			}
		}
		cc.st.Synced, cc.st.DialogID, cc.st.Bound, cc.st.KeepAlive, cc.st.Packages = true, dialog, bound, ka, pkgs
		res.Status = 200
	case "K-ALIVE":
		res.Status = 200
	case "CONTROL":
		res.Status = 420
	default:
		res.Status = 405
	}
	return res
}
