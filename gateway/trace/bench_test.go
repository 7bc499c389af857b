package trace_test

import (
	"net"
	"testing"
	"time"

	"github.com/outpost/outpost/gateway/trace"
)

// fakePacketConn returns the same datagram on every read, so the
// benchmarks measure the wrapper, not the kernel.
type fakePacketConn struct {
	data []byte
	from net.Addr
}

func (f *fakePacketConn) ReadFrom(b []byte) (int, net.Addr, error) {
	return copy(b, f.data), f.from, nil
}
func (f *fakePacketConn) WriteTo(b []byte, _ net.Addr) (int, error) { return len(b), nil }
func (f *fakePacketConn) Close() error                              { return nil }
func (f *fakePacketConn) LocalAddr() net.Addr                       { return f.from }
func (f *fakePacketConn) SetDeadline(time.Time) error               { return nil }
func (f *fakePacketConn) SetReadDeadline(time.Time) error           { return nil }
func (f *fakePacketConn) SetWriteDeadline(time.Time) error          { return nil }

func benchRead(b *testing.B, pc net.PacketConn) {
	buf := make([]byte, 2048)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := pc.ReadFrom(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func fake() *fakePacketConn {
	return &fakePacketConn{data: register, from: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5060}}
}

// BenchmarkReadRaw is the socket without the wrapper: the baseline.
func BenchmarkReadRaw(b *testing.B) { benchRead(b, fake()) }

// BenchmarkReadTracingOff is the wrapper with no consumer: one atomic load.
func BenchmarkReadTracingOff(b *testing.B) {
	benchRead(b, trace.WrapPacketConn(fake(), new(trace.Tap)))
}

// BenchmarkReadTracingOn is the wrapper with one consumer (draining its
// queue on another goroutine): a copy of the datagram and a channel send.
func BenchmarkReadTracingOn(b *testing.B) {
	tap := new(trace.Tap)
	s := tap.Attach(trace.Filter{}, 0)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-s.C():
			case <-done:
				return
			}
		}
	}()
	defer close(done)
	benchRead(b, trace.WrapPacketConn(fake(), tap))
}
