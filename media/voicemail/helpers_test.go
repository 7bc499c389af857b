package voicemail

import (
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pion/rtp"

	"github.com/outpost/outpost/media/g711"
)

// memIndex is an Index in memory, for the package's tests (the SQLite one
// has its own in appliance/store).
type memIndex struct {
	mu sync.Mutex
	m  map[string]Message
}

func newMemIndex() *memIndex { return &memIndex{m: map[string]Message{}} }

func (x *memIndex) Put(m Message) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.m[m.ID] = m
	return nil
}

func (x *memIndex) Delete(id string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.m, id)
	return nil
}

func (x *memIndex) List(mailbox string) ([]Message, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []Message
	for _, m := range x.m {
		if mailbox == "" || m.Mailbox == mailbox {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b Message) int { return a.Received.Compare(b.Received) })
	return out, nil
}

// caller is the far side of a line: what the relay would be.
type caller struct {
	t      *testing.T
	conn   *net.UDPConn
	line   netip.AddrPort
	seq    uint16
	ts     uint32
	events uint32
}

func offerFrom(port int) []byte {
	return []byte("v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n" +
		"m=audio " + strconv.Itoa(port) + " RTP/AVP 0 101\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:101 telephone-event/8000\r\na=sendrecv\r\n")
}

// dial opens a line of s answering a caller on loopback.
func dial(t *testing.T, s *Service) (*Line, *caller) {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	l, answer, err := s.Open(netip.MustParseAddr("127.0.0.1"), offerFrom(conn.LocalAddr().(*net.UDPAddr).Port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	port := l.rtp.LocalAddr().(*net.UDPAddr).Port
	if !strings.Contains(string(answer), "m=audio "+strconv.Itoa(port)+" RTP/AVP 0 101") {
		t.Fatalf("answer:\n%s", answer)
	}
	return l, &caller{t: t, conn: conn, line: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port)), ts: 1000}
}

func (c *caller) send(pt uint8, ts uint32, marker bool, payload []byte) {
	c.seq++
	b, err := (&rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: pt, SequenceNumber: c.seq, Timestamp: ts, SSRC: 77, Marker: marker}, Payload: payload}).Marshal()
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.conn.WriteToUDPAddrPort(b, c.line); err != nil {
		c.t.Fatal(err)
	}
}

// key sends digit as an RFC 4733 event: three packets, the last with the
// end bit sent three times, all with the event's timestamp.
func (c *caller) key(event byte) {
	c.events++
	ts := 900000 + c.events*8000
	for i, end := range []bool{false, false, true, true, true} {
		flags := byte(10)
		if end {
			flags |= 0x80
		}
		d := uint16(160 * (i + 1))
		c.send(101, ts, i == 0, []byte{event, flags, byte(d >> 8), byte(d)})
	}
}

// tone sends d of a sine at f Hz, paced in real time.
func (c *caller) tone(f float64, d time.Duration) {
	n := int(d / (20 * time.Millisecond))
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := range n {
		pl := make([]byte, frame)
		for j := range pl {
			k := i*frame + j
			pl[j] = g711.LinearToUlaw(int16(8000 * math.Sin(2*math.Pi*f*float64(k)/sampleRate)))
		}
		c.send(0, c.ts, false, pl)
		c.ts += frame
		<-tick.C
	}
}

// waitRecording reads what the line plays until the beep has ended (a
// quiet frame after loud 1 kHz frames).
func (c *caller) waitRecording() {
	c.t.Helper()
	buf := make([]byte, 1500)
	beeping := false
	deadline := time.Now().Add(20 * time.Second)
	_ = c.conn.SetReadDeadline(deadline)
	defer c.conn.SetReadDeadline(time.Time{})
	for {
		n, _, err := c.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			c.t.Fatalf("no beep from the line: %v", err)
		}
		var p rtp.Packet
		if p.Unmarshal(buf[:n]) != nil {
			continue
		}
		pcm := g711.Decode(nil, p.Payload, g711.Ulaw)
		f := frequency(pcm)
		switch {
		case f > 950 && f < 1050 && level(pcm) > 3000:
			beeping = true
		case beeping && level(pcm) < 50:
			return
		}
	}
}

// level is the mean absolute value of pcm.
func level(pcm []int16) int {
	var sum int
	for _, v := range pcm {
		sum += abs(int(v))
	}
	return sum / max(1, len(pcm))
}

// frequency estimates the main frequency of pcm by its zero crossings.
func frequency(pcm []int16) float64 {
	cross := 0
	for i := 1; i < len(pcm); i++ {
		if (pcm[i-1] < 0) != (pcm[i] < 0) {
			cross++
		}
	}
	return float64(cross) / 2 / (float64(len(pcm)) / sampleRate)
}

// purity is the share of pcm's energy at f (Goertzel): near 1 for a pure
// tone at f.
func purity(pcm []int16, f float64) float64 {
	w := 2 * math.Pi * f / sampleRate
	coeff := 2 * math.Cos(w)
	var s1, s2, energy float64
	for _, v := range pcm {
		x := float64(v)
		s0 := x + coeff*s1 - s2
		s2, s1 = s1, s0
		energy += x * x
	}
	power := s1*s1 + s2*s2 - coeff*s1*s2
	if energy == 0 {
		return 0
	}
	return power / (energy * float64(len(pcm)) / 2)
}
