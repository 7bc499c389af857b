package trace

import (
	"bytes"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Dir is the direction of a message, seen from the box.
type Dir uint8

const (
	In  Dir = iota // received
	Out            // sent
)

func (d Dir) String() string {
	if d == Out {
		return "out"
	}
	return "in"
}

// Message is one SIP message as it crossed a socket.
type Message struct {
	Time      time.Time
	Dir       Dir
	Transport string // "udp" or "tcp"
	Local     netip.AddrPort
	Remote    netip.AddrPort
	Data      []byte // the message as on the wire; shared, never modified
}

// Src and Dst are the message's source and destination addresses.
func (m *Message) Src() netip.AddrPort {
	if m.Dir == Out {
		return m.Local
	}
	return m.Remote
}

func (m *Message) Dst() netip.AddrPort {
	if m.Dir == Out {
		return m.Remote
	}
	return m.Local
}

// DefaultQueue is the queue length of a consumer that asks for none: a
// few seconds of a busy branch's signalling.
const DefaultQueue = 1024

// Tap hands the messages the sockets see to the attached consumers. The
// zero value is ready and off.
type Tap struct {
	sinks atomic.Pointer[[]*Sink] // nil = off: nothing attached
	mu    sync.Mutex              // serialises Attach and Detach
}

// On reports whether any consumer is attached: the sockets' wrappers call
// it for every message, so it is one atomic load.
func (t *Tap) On() bool { return t != nil && t.sinks.Load() != nil }

// Attach adds a consumer that receives the messages f matches, in a queue
// of queue messages (0 = DefaultQueue). Detach it when done.
func (t *Tap) Attach(f Filter, queue int) *Sink {
	if queue <= 0 {
		queue = DefaultQueue
	}
	s := &Sink{filter: f, ch: make(chan Message, queue)}
	t.mu.Lock()
	defer t.mu.Unlock()
	var cur []*Sink
	if p := t.sinks.Load(); p != nil {
		cur = *p
	}
	next := append(slices.Clip(cur), s)
	t.sinks.Store(&next)
	return s
}

// Detach removes s; tracing goes off with the last consumer. Messages
// being offered at the time may still land in s's queue.
func (t *Tap) Detach(s *Sink) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.sinks.Load()
	if p == nil {
		return
	}
	next := slices.DeleteFunc(slices.Clone(*p), func(x *Sink) bool { return x == s })
	if len(next) == 0 {
		t.sinks.Store(nil)
		return
	}
	t.sinks.Store(&next)
}

// Emit offers one message to every consumer whose filter matches it. It
// copies b (the socket's buffer) once, and never blocks.
func (t *Tap) Emit(dir Dir, transport string, local, remote net.Addr, b []byte) {
	p := t.sinks.Load()
	if p == nil || len(b) == 0 {
		return
	}
	m := Message{Time: time.Now(), Dir: dir, Transport: transport, Local: addrPort(local), Remote: addrPort(remote), Data: bytes.Clone(b)}
	for _, s := range *p {
		if s.filter.Match(m.Data) {
			s.offer(m)
		}
	}
}

// Sink is one consumer's bounded queue.
type Sink struct {
	filter  Filter
	ch      chan Message
	dropped atomic.Uint64
}

func (s *Sink) offer(m Message) {
	select {
	case s.ch <- m:
	default:
		s.dropped.Add(1)
	}
}

// C is where the consumer reads its messages. It is never closed.
func (s *Sink) C() <-chan Message { return s.ch }

// Dropped counts the messages dropped because the queue was full.
func (s *Sink) Dropped() uint64 { return s.dropped.Load() }

func addrPort(a net.Addr) netip.AddrPort {
	var ap netip.AddrPort
	switch a := a.(type) {
	case *net.UDPAddr:
		ap = a.AddrPort()
	case *net.TCPAddr:
		ap = a.AddrPort()
	default:
		if a != nil {
			ap, _ = netip.ParseAddrPort(a.String())
		}
	}
	return netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
}
