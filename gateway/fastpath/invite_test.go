package fastpath

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"
)

// toTag is the To tag of a response in wire text.
func toTag(t *testing.T, res string) string {
	t.Helper()
	msg, err := sip.ParseMessage([]byte(res))
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := msg.(*sip.Response).To().Params.Get("tag")
	return tag
}

// An INVITE without credentials is refused once, statelessly, with a To
// tag that marks it; its retransmission gets the same tag; the ACK of the
// refusal is absorbed. Nothing reaches sipgo.
func TestUnauthenticatedInviteRefusedStatelessly(t *testing.T) {
	r := newRig(t)
	inv := request("INVITE", "z9hG4bK-s1", "")
	if out := r.filter("UDP", inv); out != nil {
		t.Fatalf("refused INVITE passed on to sipgo: %q", out)
	}
	first := r.read()
	if !strings.HasPrefix(first, "SIP/2.0 407") {
		t.Fatalf("answer %q", first)
	}
	tag := toTag(t, first)
	if !strings.HasPrefix(tag, statelessTagPrefix) {
		t.Fatalf("To tag %q does not mark a stateless answer", tag)
	}
	if out := r.filter("UDP", inv); out != nil {
		t.Fatal("retransmission passed on")
	}
	if again := toTag(t, r.read()); again != tag {
		t.Fatalf("retransmission answered with tag %q, then %q", tag, again)
	}
	ack := request("ACK", "z9hG4bK-s1", ";tag="+tag)
	if out := r.filter("UDP", ack); out != nil {
		t.Fatal("ACK of a stateless 407 passed on to sipgo")
	}
	if n := r.p.Drops()[KindStatelessAck]; n != 1 {
		t.Fatalf("stateless ACKs %d, want 1", n)
	}
	r.peer.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, _, err := r.peer.ReadFrom(make([]byte, 4096)); err == nil {
		t.Fatalf("unexpected datagram of %d bytes", n)
	}
}

// An INVITE Admit lets through (credentials that verify, a trusted trunk)
// goes to sipgo untouched and unanswered; over TCP Admit is not asked.
func TestAdmittedInvitePassesOn(t *testing.T) {
	r := newRig(t)
	inv := request("INVITE", "z9hG4bK-ok", "\r\nProxy-Authorization: Digest username=\"a\"")
	if out := r.filter("UDP", inv); string(out) != inv {
		t.Fatalf("admitted INVITE not passed on: %q", out)
	}
	if r.admitted.Load() != 1 {
		t.Fatal("Admit not asked")
	}
	tcp := request("INVITE", "z9hG4bK-tcp", "")
	if out := r.filter("TCP", tcp); string(out) != tcp {
		t.Fatal("TCP INVITE not passed on")
	}
	if r.refused.Load() != 0 || r.admitted.Load() != 1 {
		t.Fatal("Admit asked about a TCP INVITE")
	}
}

// Refusals to one source are limited to RefusalBurst at once and
// RefusalRate per second; beyond that they are dropped and counted.
func TestRefusalsAreRateLimitedPerSource(t *testing.T) {
	r := newRig(t)
	const rate, burst = 20, 40
	r.p.SetRefusalRate(rate, burst)
	send := func(n int, prefix string) int {
		sent := 0
		for i := range n {
			r.filter("UDP", request("INVITE", "z9hG4bK-"+prefix+string(rune('a'+i%26))+string(rune('a'+i/26)), ""))
		}
		r.peer.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		buf := make([]byte, 4096)
		for {
			if _, _, err := r.peer.ReadFrom(buf); err != nil {
				return sent
			}
			sent++
		}
	}
	if got := send(100, "x"); got != burst {
		t.Fatalf("%d refusals sent of 100 at once, want %d", got, burst)
	}
	if n := r.p.Drops()[KindRateLimited]; n != 100-burst {
		t.Fatalf("rate_limited %d, want %d", n, 100-burst)
	}
	r.clock = r.clock.Add(time.Second)
	if got := send(100, "y"); got != rate {
		t.Fatalf("%d refusals a second later, want %d", got, rate)
	}
}

// The 503 of an overloaded box answers an authenticated INVITE: it is sent
// for every one, whatever the source's refusal rate, still statelessly
// (marked To tag, nothing passed on).
func TestOverloadRefusalsAreNotLimitedPerSource(t *testing.T) {
	r := newRig(t)
	r.p.SetRefusalRate(20, 40)
	for i := range 100 {
		inv := strings.Replace(request("INVITE", fmt.Sprintf("z9hG4bK-o%d", i), ""), "Content-Length",
			"Proxy-Authorization: Digest x\r\nX-Overload: 1\r\nContent-Length", 1)
		if out := r.filter("UDP", inv); out != nil {
			t.Fatalf("shed INVITE passed on to sipgo: %q", out)
		}
		res := r.read()
		if !strings.HasPrefix(res, "SIP/2.0 503") || !strings.HasPrefix(toTag(t, res), statelessTagPrefix) {
			t.Fatalf("answer %d: %q", i, res)
		}
	}
	if n := r.p.Drops()[KindRateLimited]; n != 0 {
		t.Fatalf("rate_limited %d, want 0", n)
	}
}

func TestSourceLimiterStaysBounded(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	l := newSourceLimiter(RefusalRate, RefusalBurst, func() time.Time { return now })
	for i := range 3 * maxSources {
		ip := [4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}
		l.allow(netipFrom4(ip))
	}
	if n := len(l.m); n > maxSources {
		t.Fatalf("%d sources kept, bound %d", n, maxSources)
	}
}

func netipFrom4(b [4]byte) netip.Addr { return netip.AddrFrom4(b) }

// BenchmarkRefusalLimiter is the per-INVITE cost of the refusal limit:
// a few sources, each within its rate, so every call takes a token.
func BenchmarkRefusalLimiter(b *testing.B) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	l := newSourceLimiter(1e9, 1e9, func() time.Time { return now })
	ips := []netip.Addr{netipFrom4([4]byte{10, 0, 0, 1}), netipFrom4([4]byte{10, 0, 0, 2}), netipFrom4([4]byte{10, 0, 0, 3})}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now = now.Add(time.Microsecond)
		if !l.allow(ips[i%len(ips)]) {
			b.Fatal("refused within the rate")
		}
	}
}
