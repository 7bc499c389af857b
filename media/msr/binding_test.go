package msr

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emiago/sipgo/sip"
)

// fakeSender answers REGISTERs from a function; block = never answer.
type fakeSender struct {
	mu     sync.Mutex
	sent   []sentMsg
	answer func(m regMsg) (status int, granted time.Duration, block bool)
}

type sentMsg struct {
	m  regMsg
	at time.Time
}

func (f *fakeSender) local() netip.AddrPort { return netip.MustParseAddrPort("198.18.0.1:5060") }

func (f *fakeSender) send(ctx context.Context, m regMsg) (regResult, error) {
	f.mu.Lock()
	f.sent = append(f.sent, sentMsg{m, time.Now()})
	ans := f.answer
	f.mu.Unlock()
	status, granted, block := 200, time.Duration(m.expires)*time.Second, false
	if ans != nil {
		status, granted, block = ans(m)
	}
	if block {
		<-ctx.Done()
		return regResult{cseq: m.cseq}, ctx.Err()
	}
	return regResult{status: status, reason: "x", granted: granted, cseq: m.cseq}, nil
}

func (f *fakeSender) msgs() []sentMsg {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sentMsg(nil), f.sent...)
}

func testSpec(snd sender, iface, addr string) regSpec {
	return regSpec{
		snd:        snd,
		target:     target{server: "hq:5060", addr: netip.MustParseAddrPort("198.18.9.9:5060")},
		iface:      iface0(iface, addr),
		requestURI: sip.Uri{Scheme: "sip", Host: "msr-kazan"},
		aor:        sip.Uri{Scheme: "sip", User: iface + ";1", Host: "msr-kazan"},
		contact:    sip.Uri{Scheme: "sip", User: iface + ";1", Host: "198.18.0.1", Port: 5060},
		display:    iface + "(" + addr + ")",
		headers:    []header{{"P-Eltex-MSR-Iface-Addr", addr}},
		loadHeader: "P-Eltex-MSR-Load",
		expires:    600 * time.Second,
		interval:   300 * time.Second,
		retry:      600 * time.Second,
		timeout:    32 * time.Second,
	}
}

func iface0(name, addr string) iface { return iface{Name: name, Addr: netip.MustParseAddr(addr)} }

type statusLog struct {
	mu   sync.Mutex
	last UAStatus
	live bool
}

func (s *statusLog) report(st UAStatus, live bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last, s.live = st, live
}

func (s *statusLog) get() (UAStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.live
}

func startBinding(ctx context.Context, after <-chan struct{}, spec regSpec) (*binding, *statusLog) {
	sl := &statusLog{}
	b := newBinding(bindingKey{iface: spec.iface.Name}, after, func() int { return 7 }, sl.report, slog.New(slog.DiscardHandler))
	b.last = spec
	go b.run(ctx, spec)
	return b, sl
}

func gaps(ms []sentMsg) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(ms); i++ {
		out = append(out, ms[i].at.Sub(ms[i-1].at))
	}
	return out
}

// Refresh every interval; unconfirmed retried at the retry interval; a
// shorter grant refreshed at four fifths of it. synctest's clock makes
// these intervals exact.
func TestBindingTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n int
		f := &fakeSender{answer: func(m regMsg) (int, time.Duration, bool) {
			n++
			switch n {
			case 1, 2:
				return 200, 600 * time.Second, false // refresh after 300 s
			case 3:
				return 503, 0, false // retry after 600 s
			case 4:
				return 0, 0, true // no answer: timeout 32 s, retry after 600 s
			case 5:
				return 200, 100 * time.Second, false // refresh after 80 s
			}
			return 200, 600 * time.Second, false
		}}
		ctx, cancel := context.WithCancel(t.Context())
		b, sl := startBinding(ctx, nil, testSpec(f, "lan0", "198.18.1.1"))
		time.Sleep(300*time.Second*2 + 600*time.Second + 32*time.Second + 600*time.Second + 80*time.Second + time.Second)
		synctest.Wait()
		ms := f.msgs()
		want := []time.Duration{300 * time.Second, 300 * time.Second, 600 * time.Second, 632 * time.Second, 80 * time.Second}
		got := gaps(ms)
		if len(got) != len(want) {
			t.Fatalf("gaps %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("gap %d = %v, want %v", i, got[i], want[i])
			}
		}
		for i, m := range ms {
			if m.m.callID != ms[0].m.callID || m.m.fromTag != ms[0].m.fromTag || m.m.cseq != uint32(i+1) || m.m.expires != 600 {
				t.Errorf("message %d: %+v", i, m.m)
			}
			if h := m.m.headers[len(m.m.headers)-1]; h != (header{"P-Eltex-MSR-Load", "7"}) {
				t.Errorf("load header %v", h)
			}
		}
		st, live := sl.get()
		if !live || !st.Registered || st.LastStatus != 200 || st.Expires.Sub(st.LastSuccess) != 600*time.Second {
			t.Errorf("status %+v", st)
		}
		cancel()
		synctest.Wait()
		<-b.done
	})
}

// A new spec interrupts a REGISTER in flight and is sent at once.
func TestBindingPushInterrupts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSender{answer: func(m regMsg) (int, time.Duration, bool) {
			return 200, 600 * time.Second, m.headers[0].value == "198.18.1.1" // the old address hangs
		}}
		b, _ := startBinding(t.Context(), nil, testSpec(f, "lan0", "198.18.1.1"))
		time.Sleep(time.Second)
		synctest.Wait()
		b.push(testSpec(f, "lan0", "198.18.1.7"))
		synctest.Wait()
		ms := f.msgs()
		if len(ms) != 2 || ms[1].m.headers[0].value != "198.18.1.7" || ms[1].at.Sub(ms[0].at) != time.Second || ms[1].m.cseq != 2 {
			t.Fatalf("sent %+v", ms)
		}
		// An equal spec is not pushed again.
		b.push(testSpec(f, "lan0", "198.18.1.7"))
		synctest.Wait()
		if len(f.msgs()) != 2 {
			t.Errorf("an unchanged spec caused a REGISTER")
		}
		b.remove(f, false)
		<-b.done
	})
}

// Removal sends Expires: 0 for the registered contact through the sender
// given; silent removal sends nothing.
func TestBindingRemove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSender{}
		b, sl := startBinding(t.Context(), nil, testSpec(f, "lan0", "198.18.1.1"))
		synctest.Wait()
		g := &fakeSender{}
		b.remove(g, false)
		<-b.done
		if len(f.msgs()) != 1 || len(g.msgs()) != 1 {
			t.Fatalf("sent %d then %d", len(f.msgs()), len(g.msgs()))
		}
		un := g.msgs()[0].m
		if un.expires != 0 || un.callID != f.msgs()[0].m.callID || un.cseq != 2 || un.contact.String() != "sip:lan0;1@198.18.0.1:5060" {
			t.Errorf("unREGISTER %+v", un)
		}
		if _, live := sl.get(); live {
			t.Error("status still live after removal")
		}

		h := &fakeSender{}
		b2, _ := startBinding(t.Context(), nil, testSpec(h, "lan1", "198.18.2.1"))
		synctest.Wait()
		b2.remove(h, true)
		<-b2.done
		if len(h.msgs()) != 1 {
			t.Errorf("silent removal sent %d messages", len(h.msgs()))
		}
	})
}

// When the contact moves (new service address), the old one is
// unREGISTERed before the new one is registered; so is one whose
// REGISTER is still unanswered, since it may have reached the registrar.
func TestBindingContactMoves(t *testing.T) {
	for _, unanswered := range []bool{false, true} {
		t.Run(fmt.Sprintf("unanswered=%v", unanswered), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeSender{answer: func(m regMsg) (int, time.Duration, bool) {
					return 200, 600 * time.Second, unanswered && m.expires != 0 && m.contact.Host == "198.18.0.1"
				}}
				b, _ := startBinding(t.Context(), nil, testSpec(f, "lan0", "198.18.1.1"))
				synctest.Wait()
				s := testSpec(f, "lan0", "198.18.1.1")
				s.contact.Host = "198.18.0.2"
				b.push(s)
				synctest.Wait()
				ms := f.msgs()
				if len(ms) != 3 || ms[1].m.expires != 0 || ms[1].m.contact.Host != "198.18.0.1" ||
					ms[2].m.expires != 600 || ms[2].m.contact.Host != "198.18.0.2" {
					t.Fatalf("sent %+v", ms)
				}
				b.remove(f, false)
				<-b.done
				if last := f.msgs()[3].m; !unanswered && (last.expires != 0 || last.contact.Host != "198.18.0.2") {
					t.Errorf("final unREGISTER %+v", last)
				}
			})
		})
	}
}

// A binding re-created while its predecessor still sends the unREGISTER
// waits for it, so the registrar never sees them reversed.
func TestBindingWaitsForPredecessor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var calls int
		f := &fakeSender{answer: func(m regMsg) (int, time.Duration, bool) {
			calls++
			if m.expires == 0 {
				<-release // the unREGISTER is slow
			}
			return 200, 600 * time.Second, false
		}}
		old, _ := startBinding(t.Context(), nil, testSpec(f, "lan0", "198.18.1.1"))
		synctest.Wait()
		old.remove(f, false)
		synctest.Wait()
		nb, _ := startBinding(t.Context(), old.done, testSpec(f, "lan0", "198.18.1.1"))
		synctest.Wait()
		if n := len(f.msgs()); n != 2 {
			t.Fatalf("%d sent before the unREGISTER finished, want 2", n)
		}
		close(release)
		synctest.Wait()
		ms := f.msgs()
		if len(ms) != 3 || ms[2].m.expires != 600 || ms[2].m.callID == ms[0].m.callID {
			t.Errorf("sent %+v", ms)
		}
		nb.remove(nil, true)
		<-nb.done
	})
}

func TestExpirySeconds(t *testing.T) {
	for d, want := range map[time.Duration]int{0: 1, 400 * time.Millisecond: 1, time.Second: 1, 1500 * time.Millisecond: 2, 600 * time.Second: 600} {
		if got := expirySeconds(d); got != want {
			t.Errorf("expirySeconds(%v) = %d, want %d", d, got, want)
		}
	}
}
