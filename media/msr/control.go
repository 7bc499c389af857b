package msr

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Control-channel limits.
const (
	maxChannels  = 16              // concurrent connections; more are closed at once
	writeTimeout = 5 * time.Second // one response
	maxKeepAlive = 24 * time.Hour  // a larger Keep-Alive is capped
)

// ChannelStatus is one control-channel connection.
type ChannelStatus struct {
	Remote    netip.AddrPort `json:"remote"`
	Since     time.Time      `json:"since"`
	Synced    bool           `json:"synced"`
	DialogID  string         `json:"dialog_id,omitempty"`
	Packages  []string       `json:"packages,omitempty"` // what the client asked for in SYNC
	KeepAlive time.Duration  `json:"keep_alive"`
	LastRecv  time.Time      `json:"last_recv"`
	Requests  uint64         `json:"requests"`
}

// ControlStatus is the control-channel listener and its connections.
type ControlStatus struct {
	Listen   netip.AddrPort  `json:"listen,omitzero"` // zero when not listening
	Error    string          `json:"error,omitempty"` // why not listening
	Accepted uint64          `json:"accepted"`
	Dropped  uint64          `json:"dropped"` // closed for timeout, bad framing or overload
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
// that value rather than refused. No control package is implemented:
// CONTROL is answered 420 (unsupported package), REPORT (sent by servers)
// and unknown methods 405, anything before SYNC 403.
type controlServer struct {
	ln        net.Listener
	addr      netip.AddrPort
	keepAlive time.Duration
	log       *slog.Logger

	mu       sync.Mutex
	conns    map[*ctlConn]struct{}
	accepted uint64
	dropped  uint64
	closed   bool
	wg       sync.WaitGroup
}

type ctlConn struct {
	c  net.Conn
	st ChannelStatus // guarded by controlServer.mu
}

func listenControl(ctx context.Context, socks Sockets, addr netip.AddrPort, keepAlive time.Duration, log *slog.Logger) (*controlServer, error) {
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
	s := &controlServer{ln: ln, addr: addr, keepAlive: keepAlive, log: log, conns: map[*ctlConn]struct{}{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.accept()
	}()
	return s, nil
}

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
		s.mu.Lock()
		if s.closed || len(s.conns) >= maxChannels {
			s.dropped++
			s.mu.Unlock()
			_ = c.Close()
			continue
		}
		now := time.Now()
		cc := &ctlConn{c: c, st: ChannelStatus{Since: now, LastRecv: now, KeepAlive: s.keepAlive}}
		if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			cc.st.Remote = ta.AddrPort()
		}
		s.conns[cc] = struct{}{}
		s.accepted++
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serve(cc)
		}()
	}
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

// setKeepAlive changes the keep-alive of channels accepted from now on.
func (s *controlServer) setKeepAlive(d time.Duration) {
	s.mu.Lock()
	s.keepAlive = d
	s.mu.Unlock()
}

func (s *controlServer) status() ControlStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := ControlStatus{Listen: s.addr, Accepted: s.accepted, Dropped: s.dropped}
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
		ka := cc.st.KeepAlive
		s.mu.Unlock()
		// RFC 6230 §6.2: nothing received for the keep-alive interval
		// means the channel is dead.
		_ = cc.c.SetReadDeadline(time.Now().Add(ka))
		f, err := ReadFrame(r)
		if err != nil {
			switch {
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
		res := s.handle(cc, f)
		_ = cc.c.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := cc.c.Write(res.Marshal()); err != nil {
			reason = "write: " + err.Error()
			return
		}
	}
}

// handle answers one request.
func (s *controlServer) handle(cc *ctlConn, f *Frame) *Frame {
	res := &Frame{TransID: f.TransID}
	s.mu.Lock()
	defer s.mu.Unlock()
	cc.st.Requests++
	if f.Method != "SYNC" && !cc.st.Synced {
		res.Status = 403
		return res
	}
	switch f.Method {
	case "SYNC":
		dialog, _ := f.Get("Dialog-ID")
		if dialog == "" {
			res.Status = 400
			return res
		}
		ka := s.keepAlive
		if v, ok := f.Get("Keep-Alive"); ok {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				res.Status = 400
				return res
			}
			ka = min(time.Duration(n)*time.Second, maxKeepAlive)
		}
		var pkgs []string
		if v, ok := f.Get("Packages"); ok {
			for p := range strings.SplitSeq(v, ",") {
				if p = strings.TrimSpace(p); p != "" {
					pkgs = append(pkgs, p)
				}
			}
		}
		cc.st.Synced, cc.st.DialogID, cc.st.KeepAlive, cc.st.Packages = true, dialog, ka, pkgs
		res.Status = 200
		res.Header = []Field{{"Keep-Alive", strconv.Itoa(int(ka / time.Second))}}
	case "K-ALIVE":
		res.Status = 200
	case "CONTROL":
		res.Status = 420
	default:
		res.Status = 405
	}
	return res
}
