package gateway

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/outpost/outpost/gateway/trace"
	"github.com/outpost/outpost/gateway/trace/tracetest"
)

// TestCaptureHEP: with a HEP server configured, a REGISTER and its 401
// reach the capture server with the box's and the phone's addresses; a
// push that removes the section stops the export, one that brings it back
// starts it again; a live trace subscriber sees the same messages.
func TestCaptureHEP(t *testing.T) {
	hep, err := tracetest.NewHEPServer()
	if err != nil {
		t.Fatal(err)
	}
	defer hep.Close()
	cfg := testConfig(Listen{Transport: "udp", Addr: "127.0.0.1:0"})
	cfg.Capture = Capture{HEPServer: "udp:" + hep.UDP.LocalAddr().String(), NodeID: 42, Password: "k"}
	s := startServer(t, cfg)
	box := netip.MustParseAddrPort(strings.TrimPrefix(s.Listeners()[0], "udp:"))
	p := newPhone(t, s.Listeners()[0])
	ph := p.conn.LocalAddr().(*net.UDPAddr).AddrPort()

	sub := s.Trace().Attach(trace.Filter{Field: "user", Value: "1001"}, 0)
	defer s.Trace().Detach(sub)
	p.send(p.register("z9hG4bK-c1", 1, ""))
	if res := p.read(); !strings.HasPrefix(res, "SIP/2.0 401") {
		t.Fatalf("answer %q", res)
	}
	for i, want := range []struct{ src, dst netip.AddrPort }{{ph, box}, {box, ph}} {
		select {
		case h := <-hep.C:
			src, dst := h.Addrs()
			if src != want.src || dst != want.dst || h.Uint(12) != 42 || string(h[14]) != "k" || h.Uint(11) != 1 || len(h[0x11]) == 0 {
				t.Errorf("HEP packet %d: %s → %s, chunks %v", i, src, dst, h)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("HEP packet %d not received", i)
		}
		m := <-sub.C()
		if m.Src() != want.src || m.Dst() != want.dst {
			t.Errorf("trace %d: %s → %s", i, m.Src(), m.Dst())
		}
	}

	off := cfg
	off.Capture = Capture{}
	if err := s.Reconfigure(t.Context(), off); err != nil {
		t.Fatal(err)
	}
	if sent, _ := s.HEPStats(); sent != 0 {
		t.Fatalf("HEP stats without an exporter: %d", sent)
	}
	p.send(p.register("z9hG4bK-c2", 2, ""))
	p.read()
	<-sub.C()
	<-sub.C() // the subscriber still sees them
	select {
	case h := <-hep.C:
		t.Fatalf("HEP packet after the capture section was removed: %v", h)
	case <-time.After(200 * time.Millisecond):
	}
	if err := s.Reconfigure(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	p.send(p.register("z9hG4bK-c3", 3, ""))
	p.read()
	for range 2 {
		select {
		case <-hep.C:
		case <-time.After(5 * time.Second):
			t.Fatal("HEP export did not resume")
		}
	}
	bad := cfg
	bad.Capture.HEPServer = "sctp:1.2.3.4:9060"
	if err := s.Reconfigure(t.Context(), bad); err == nil || !strings.Contains(err.Error(), "capture") {
		t.Fatalf("bad HEP server: %v", err)
	}
}
