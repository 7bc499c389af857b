package gateway

import (
	"fmt"
	"time"

	"github.com/outpost/outpost/gateway/listen"
	"github.com/outpost/outpost/gateway/trace"
)

// Capture is where the box sends a copy of every SIP message (HEPv3, to a
// Homer capture server). The zero value sends nothing.
type Capture struct {
	HEPServer string // "udp:HOST:PORT" or "tcp:HOST:PORT"; "" = off
	NodeID    uint32 // the capture agent id Homer shows
	Password  string // HEP auth key; "" = none
}

// capturePart is the Server's HEP exporter: built by Prepare (New), started
// by Run or, while running, by Commit; the Server's mu guards it.
type capturePart struct {
	tap     trace.Tap
	exp     *trace.Exporter // nil = no HEP export
	running bool
}

// newExporter checks c and builds its exporter, not started (nil when off).
func (s *Server) newExporter(c Capture) (*trace.Exporter, error) {
	if c.HEPServer == "" {
		return nil, nil
	}
	e, err := trace.NewExporter(trace.HEPConfig{Server: c.HEPServer, NodeID: c.NodeID, Password: c.Password}, s.log.With("part", "hep"))
	if err != nil {
		return nil, fmt.Errorf("gateway: capture: %w", err)
	}
	return e, nil
}

// swap replaces the exporter (s.mu held): the old one stops, the new one
// starts when the Server runs.
func (c *capturePart) swap(next *trace.Exporter) {
	if c.exp != nil && c.running {
		c.exp.Close()
	}
	c.exp = next
	if c.exp != nil && c.running {
		c.exp.Start(&c.tap)
	}
}

// run starts the exporter (s.mu held); stop ends it.
func (c *capturePart) run() {
	c.running = true
	if c.exp != nil {
		c.exp.Start(&c.tap)
	}
}

func (c *capturePart) stop() {
	if c.exp != nil && c.running {
		c.exp.Close()
	}
	c.running = false
}

// listenOptions are cfg's socket options with the Server's trace tap.
func (s *Server) listenOptions(cfg Config) listen.Options {
	o := cfg.listenOptions()
	o.Tap = &s.capture.tap
	o.TLS = s.tlsConf
	o.Sojourn = func(d time.Duration) { s.overload.ObserveSocket(d) }
	return o
}

// Trace is the tap every SIP message the listeners send or receive goes
// through: attach a consumer to see them (outpostctl trace).
func (s *Server) Trace() *trace.Tap { return &s.capture.tap }

// HEPStats counts the messages sent to the HEP capture server and those
// dropped (queue full, server unreachable); zeros without one.
func (s *Server) HEPStats() (sent, dropped uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.capture.exp == nil {
		return 0, 0
	}
	return s.capture.exp.Stats()
}
