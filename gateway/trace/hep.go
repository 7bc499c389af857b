package trace

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outpost/outpost/siptarget"
)

// HEPv3 (the Homer encapsulation protocol, version 3): "HEP3", the total
// length, then chunks of vendor id 0 (generic), type, length (with its
// 6-byte header) and value, all big-endian.
const (
	hepFamily    = 0x0001 // IP protocol family: 2 = IPv4, 10 = IPv6
	hepProto     = 0x0002 // IP protocol: 17 = UDP, 6 = TCP
	hepSrc4      = 0x0003
	hepDst4      = 0x0004
	hepSrc6      = 0x0005
	hepDst6      = 0x0006
	hepSrcPort   = 0x0007
	hepDstPort   = 0x0008
	hepTimeSec   = 0x0009
	hepTimeUsec  = 0x000a
	hepProtoType = 0x000b // 1 = SIP
	hepAgentID   = 0x000c // capture agent (node) id
	hepAuthKey   = 0x000e
	hepPayload   = 0x000f
	hepCorrID    = 0x0011 // correlation id: the Call-ID
)

// maxHEP is the largest HEP packet: its length field has 16 bits.
const maxHEP = 65535

// EncodeHEP encodes m as one HEPv3 packet for capture agent nodeID with
// the auth key password ("" = none). A message too large for one packet
// has its payload cut.
func EncodeHEP(m *Message, nodeID uint32, password string) []byte {
	b := make([]byte, 6, 128+len(m.Data))
	copy(b, "HEP3")
	src, dst := m.Src(), m.Dst()
	if src.Addr().Is4() {
		b = chunk(b, hepFamily, 2)
	} else {
		b = chunk(b, hepFamily, 10)
	}
	if m.Transport == "tcp" {
		b = chunk(b, hepProto, 6)
	} else {
		b = chunk(b, hepProto, 17)
	}
	if src.Addr().Is4() {
		s, d := src.Addr().As4(), dst.Addr().As4()
		b = chunk(b, hepSrc4, s[:]...)
		b = chunk(b, hepDst4, d[:]...)
	} else {
		s, d := src.Addr().As16(), dst.Addr().As16()
		b = chunk(b, hepSrc6, s[:]...)
		b = chunk(b, hepDst6, d[:]...)
	}
	b = chunk(b, hepSrcPort, byte(src.Port()>>8), byte(src.Port()))
	b = chunk(b, hepDstPort, byte(dst.Port()>>8), byte(dst.Port()))
	b = chunk(b, hepTimeSec, be32(uint32(m.Time.Unix()))...)
	b = chunk(b, hepTimeUsec, be32(uint32(m.Time.Nanosecond()/1000))...)
	b = chunk(b, hepProtoType, 1)
	b = chunk(b, hepAgentID, be32(nodeID)...)
	if password != "" {
		b = chunk(b, hepAuthKey, []byte(password)...)
	}
	if id := Header(m.Data, "call-id", "i"); len(id) > 0 {
		b = chunk(b, hepCorrID, id...)
	}
	payload := m.Data[:min(len(m.Data), maxHEP-len(b)-6)]
	b = chunk(b, hepPayload, payload...)
	binary.BigEndian.PutUint16(b[4:], uint16(len(b)))
	return b
}

func chunk(b []byte, typ uint16, v ...byte) []byte {
	b = append(b, 0, 0, byte(typ>>8), byte(typ), 0, 0)
	binary.BigEndian.PutUint16(b[len(b)-2:], uint16(6+len(v)))
	return append(b, v...)
}

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// HEPConfig is where and how the HEP exporter sends.
type HEPConfig struct {
	Server   string // "udp:HOST:PORT" or "tcp:HOST:PORT"
	NodeID   uint32 // capture agent id
	Password string // auth key; "" = none
	Queue    int    // messages waiting to be sent; 0 = DefaultQueue
}

// ParseHEPServer reads "udp:HOST:PORT" or "tcp:HOST:PORT" (siptarget's
// grammar with transport and port required: HEP has no default port) into
// what net.Dial takes.
func ParseHEPServer(s string) (network, addr string, err error) {
	t, err := siptarget.ParseExplicit(s)
	if err != nil {
		return "", "", fmt.Errorf("HEP server: %w", err)
	}
	if t.Transport == siptarget.TLS {
		return "", "", fmt.Errorf("HEP server %q: want udp:HOST:PORT or tcp:HOST:PORT", s)
	}
	return string(t.Transport), t.HostPort(), nil
}

// Exporter sends every traced message to a HEP capture server (Homer),
// from its own goroutine: Start attaches it to a Tap, Close detaches and
// waits for it. Messages that find its queue full, or that cannot be sent
// (the server unreachable), are dropped and counted. Over TCP it dials
// again, at most once a second, after a failure.
type Exporter struct {
	cfg     HEPConfig
	network string
	addr    string
	log     *slog.Logger

	tap  *Tap
	sink *Sink
	stop chan struct{}
	wg   sync.WaitGroup

	sent, failed atomic.Uint64
}

// HEP dial and write timeouts: a capture server that does not take a
// packet within this time loses it (the queue absorbs short stalls).
const (
	hepDialTimeout  = 2 * time.Second
	hepWriteTimeout = 2 * time.Second
	hepRedial       = time.Second
)

// NewExporter checks cfg; nothing is sent until Start.
func NewExporter(cfg HEPConfig, log *slog.Logger) (*Exporter, error) {
	network, addr, err := ParseHEPServer(cfg.Server)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Exporter{cfg: cfg, network: network, addr: addr, log: log}, nil
}

// Config is the configuration e was made from.
func (e *Exporter) Config() HEPConfig { return e.cfg }

// Start attaches e to tap and starts its goroutine. Call it once.
func (e *Exporter) Start(tap *Tap) {
	e.tap, e.sink, e.stop = tap, tap.Attach(Filter{}, e.cfg.Queue), make(chan struct{})
	e.wg.Go(e.run)
}

// Close detaches e and waits for its goroutine; a no-op before Start.
func (e *Exporter) Close() {
	if e.stop == nil {
		return
	}
	e.tap.Detach(e.sink)
	close(e.stop)
	e.wg.Wait()
	e.stop = nil
}

// Stats counts the packets sent and the messages dropped (queue full,
// server unreachable).
func (e *Exporter) Stats() (sent, dropped uint64) {
	d := e.failed.Load()
	if e.sink != nil {
		d += e.sink.Dropped()
	}
	return e.sent.Load(), d
}

func (e *Exporter) run() {
	var c net.Conn
	var nextDial time.Time
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for {
		var m Message
		select {
		case <-e.stop:
			return
		case m = <-e.sink.C():
		}
		if c == nil {
			if time.Now().Before(nextDial) {
				e.failed.Add(1)
				continue
			}
			var err error
			if c, err = net.DialTimeout(e.network, e.addr, hepDialTimeout); err != nil {
				e.log.Warn("HEP capture server unreachable", "server", e.cfg.Server, "err", err)
				c, nextDial = nil, time.Now().Add(hepRedial)
				e.failed.Add(1)
				continue
			}
		}
		c.SetWriteDeadline(time.Now().Add(hepWriteTimeout))
		if _, err := c.Write(EncodeHEP(&m, e.cfg.NodeID, e.cfg.Password)); err != nil {
			e.failed.Add(1)
			// UDP: an ICMP unreachable from a restarting server; keep the
			// socket. TCP: the stream is broken; dial again.
			e.log.Debug("HEP send failed", "server", e.cfg.Server, "err", err)
			if e.network == "tcp" {
				c.Close()
				c, nextDial = nil, time.Now().Add(hepRedial)
			}
			continue
		}
		e.sent.Add(1)
	}
}
