package relay

import (
	"errors"
	"testing"
	"time"

	"github.com/outpost/outpost/media/g711"
)

// TestEndpointForwardTranscode: two endpoints on different addresses,
// one µ-law, one A-law, forwarding both ways with transcoding and
// telephone-event mapped; one way only; then nowhere; Close frees ports.
func TestEndpointForwardTranscode(t *testing.T) {
	r := newRelay(t, Config{Codecs: []string{"PCMU", "PCMA", "telephone-event"}})
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	ea, ansA, err := r.OpenEndpoint(EndpointConfig{ID: "a", Local: boxA}, pa.sdp(1, []string{"0 PCMU", "101 telephone-event"}))
	if err != nil {
		t.Fatal(err)
	}
	eb, ansB, err := r.OpenEndpoint(EndpointConfig{ID: "b", Local: boxB}, pb.sdp(1, []string{"8 PCMA", "96 telephone-event"}))
	if err != nil {
		t.Fatal(err)
	}
	ma, mb := mediaOf(t, ansA), mediaOf(t, ansB)
	if ma.Addr != boxA || mb.Addr != boxB || len(ma.Codecs) != 2 || !ma.Codecs[0].Is("PCMU") || !mb.Codecs[0].Is("PCMA") {
		t.Fatalf("answers: %+v / %+v", ma, mb)
	}
	if got := r.PortsInUse(); got != 4 {
		t.Fatalf("ports in use %d, want 4", got)
	}
	ea.ForwardTo(eb)
	eb.ForwardTo(ea)
	ulaw := []byte{0xFF, 0x80, 0x00, 0x7F}
	pa.send(addrOf(ma), 0, ulaw)
	got := pb.recv()
	want := append([]byte(nil), ulaw...)
	g711.UlawToAlawInPlace(want)
	if got.pt != 8 || string(got.payload) != string(want) || got.from != addrOf(mb) {
		t.Fatalf("A→B: pt %d payload %x from %v; want 8 %x from %v", got.pt, got.payload, got.from, want, addrOf(mb))
	}
	pb.send(addrOf(mb), 96, []byte{1, 2, 3, 4})
	if got := pa.recv(); got.pt != 101 || got.from != addrOf(ma) {
		t.Fatalf("B→A telephone-event: pt %d from %v", got.pt, got.from)
	}
	// One way: B no longer forwards.
	eb.ForwardTo(nil)
	pb.send(addrOf(mb), 8, ulaw)
	waitFor(t, "B's packet dropped", func() bool { return eb.Stats().Dropped == 1 })
	pa.send(addrOf(ma), 0, ulaw)
	pb.recv()
	if _, err := pa.tryRecv(100 * time.Millisecond); err == nil {
		t.Fatal("A received media while B forwards nowhere")
	}
	// A stranger's packets are refused (signalled latching).
	pb.send(addrOf(ma), 0, ulaw)
	waitFor(t, "stranger refused", func() bool { return ea.Stats().Refused == 1 })
	open := r.Stats().EndpointPackets
	if want := ea.Stats().Received + eb.Stats().Received; open != want || open == 0 {
		t.Fatalf("EndpointPackets while open = %d, want %d", open, want)
	}
	ea.Close()
	eb.Close()
	if got := r.PortsInUse(); got != 0 || r.Endpoints() != 0 {
		t.Fatalf("after Close: %d ports, %d endpoints", got, r.Endpoints())
	}
	// Closed endpoints' packets stay counted (a rate sampler's counter).
	if got := r.Stats(); got.EndpointPackets != open || got.TotalPackets() != open {
		t.Fatalf("after Close: EndpointPackets %d, TotalPackets %d, want %d", got.EndpointPackets, got.TotalPackets(), open)
	}
}

func TestEndpointNotAcceptable(t *testing.T) {
	r := newRelay(t, Config{Codecs: []string{"PCMA"}})
	p := newPhone(t, phoneA)
	if _, _, err := r.OpenEndpoint(EndpointConfig{ID: "x", Local: boxA}, p.sdp(1, []string{"0 PCMU", "18 G729"})); !errors.Is(err, ErrNotAcceptable) {
		t.Fatalf("err %v, want ErrNotAcceptable", err)
	}
	if r.PortsInUse() != 0 {
		t.Fatal("ports bound after a refused offer")
	}
	e, _, err := r.OpenEndpoint(EndpointConfig{ID: "y", Local: boxA}, p.sdp(1, []string{"8 PCMA"}))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := e.Update(p.sdp(2, []string{"0 PCMU"})); !errors.Is(err, ErrNotAcceptable) {
		t.Fatalf("update: %v", err)
	}
	ans, err := e.Update(p.sdp(2, []string{"8 PCMA"}, "a=sendonly"))
	if err != nil {
		t.Fatal(err)
	}
	if m := mediaOf(t, ans); m.Direction.String() != "recvonly" || m.Port != e.Port() {
		t.Fatalf("answer to sendonly: %v port %d", m.Direction, m.Port)
	}
}

func TestEndpointInactivity(t *testing.T) {
	r := newRelay(t, Config{InactivityTimeout: 300 * time.Millisecond})
	p := newPhone(t, phoneA)
	fired := make(chan string, 1)
	e, _, err := r.OpenEndpoint(EndpointConfig{ID: "z", Local: boxA, OnInactive: func(s string) { fired <- s }}, p.sdp(1, []string{"0 PCMU"}))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("no inactivity callback")
	}
}
