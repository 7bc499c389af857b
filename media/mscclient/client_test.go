package mscclient

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost/outpost/media/msr"
)

// fakeMSR is a control-channel server written for the test: it answers
// SYNC with the Keep-Alive it grants, K-ALIVE 200, and CONTROL with what
// answer says; it records every request.
type fakeMSR struct {
	t      *testing.T
	ln     net.Listener
	grant  string
	answer func(f *msr.Frame) *msr.Frame

	mu   sync.Mutex
	seen []*msr.Frame
	conn []net.Conn
	wg   sync.WaitGroup
	kal  chan struct{} // a K-ALIVE arrived
}

func newFakeMSR(t *testing.T, answer func(f *msr.Frame) *msr.Frame) *fakeMSR {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeMSR{t: t, ln: ln, grant: "30", answer: answer, kal: make(chan struct{}, 100)}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conn = append(s.conn, c)
			s.mu.Unlock()
			s.wg.Go(func() { s.serve(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		s.dropAll()
		s.wg.Wait()
	})
	return s
}

func (s *fakeMSR) addr() netip.AddrPort { return netip.MustParseAddrPort(s.ln.Addr().String()) }

func (s *fakeMSR) dropAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conn {
		c.Close()
	}
}

func (s *fakeMSR) serve(c net.Conn) {
	r := bufio.NewReader(c)
	for {
		f, err := msr.ReadFrame(r)
		if err != nil {
			return
		}
		if f.Method == "" {
			continue
		}
		s.mu.Lock()
		s.seen = append(s.seen, f)
		s.mu.Unlock()
		res := &msr.Frame{TransID: f.TransID, Status: 200}
		switch f.Method {
		case "SYNC":
			res.Header = []msr.Field{{Name: "Keep-Alive", Value: s.grant}}
		case "K-ALIVE":
			s.kal <- struct{}{}
		case "CONTROL":
			res = s.answer(f)
			if res == nil {
				continue // silent
			}
			res.TransID = f.TransID
		}
		c.Write(res.Marshal())
	}
}

func mixerOK(f *msr.Frame) *msr.Frame {
	return &msr.Frame{Status: 200, Header: []msr.Field{{Name: "Content-Type", Value: mixerContentType}},
		Body: []byte(`<mscmixer version="1.0" xmlns="urn:ietf:params:xml:ns:msc-mixer"><response status="200" reason="join successful"/></mscmixer>`)}
}

func TestDialSyncJoin(t *testing.T) {
	s := newFakeMSR(t, mixerOK)
	c, err := Dial(t.Context(), Config{Addr: s.addr(), DialogID: "dlg1", KeepAlive: 40 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Join(t.Context(), "aaaa:bbbb", "cccc:dddd"); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	sync, ctl := s.seen[0], s.seen[1]
	s.mu.Unlock()
	for name, want := range map[string]string{"Dialog-ID": "dlg1", "Keep-Alive": "40", "Packages": MixerPackage} {
		if v, _ := sync.Get(name); v != want {
			t.Errorf("SYNC %s = %q, want %q", name, v, want)
		}
	}
	if v, _ := ctl.Get("Control-Package"); v != MixerPackage {
		t.Errorf("CONTROL Control-Package %q", v)
	}
	if !strings.Contains(string(ctl.Body), `<join id1="aaaa:bbbb" id2="cccc:dddd"/>`) {
		t.Errorf("CONTROL body %s", ctl.Body)
	}
}

func TestMixerAndStatusErrors(t *testing.T) {
	answers := map[string]*msr.Frame{
		"join":   {Status: 200, Body: []byte(`<mscmixer version="1.0"><response status="412" reason="connection does not exist"/></mscmixer>`)},
		"unjoin": {Status: 420},
	}
	s := newFakeMSR(t, func(f *msr.Frame) *msr.Frame {
		for k, v := range answers {
			if strings.Contains(string(f.Body), "<"+k+" ") {
				return &msr.Frame{Status: v.Status, Body: v.Body}
			}
		}
		return &msr.Frame{Status: 200, Body: []byte("not xml")}
	})
	c, err := Dial(t.Context(), Config{Addr: s.addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var me *MixerError
	if err := c.Join(t.Context(), "a:b", "c:d"); !errors.As(err, &me) || me.Status != 412 {
		t.Errorf("join of an unknown connection: %v", err)
	}
	var se *StatusError
	if err := c.Unjoin(t.Context(), "a:b", "c:d"); !errors.As(err, &se) || se.Status != 420 {
		t.Errorf("unjoin answered 420: %v", err)
	}
	if _, err := c.Control(t.Context(), MixerBody("modifyjoin", "a:b", "c:d")); !errors.Is(err, ErrResponse) {
		t.Errorf("garbage package response: %v", err)
	}
	// Errors in the package do not close the channel.
	if err := c.KeepAlive(t.Context()); err != nil {
		t.Errorf("keep-alive after package errors: %v", err)
	}
}

func TestSyncRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		f, err := msr.ReadFrame(bufio.NewReader(c))
		if err != nil {
			return
		}
		c.Write((&msr.Frame{TransID: f.TransID, Status: 422}).Marshal())
	})
	_, err = Dial(t.Context(), Config{Addr: netip.MustParseAddrPort(ln.Addr().String())})
	var se *StatusError
	if !errors.As(err, &se) || se.Status != 422 {
		t.Fatalf("SYNC refused with 422: %v", err)
	}
}

// A silent server fails the transaction and closes the channel; a dropped
// one closes it too, and the Pool dials again.
func TestFailuresAndPool(t *testing.T) {
	s := newFakeMSR(t, func(*msr.Frame) *msr.Frame { return nil })
	c, err := Dial(t.Context(), Config{Addr: s.addr(), Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Join(t.Context(), "a:b", "c:d"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("join without an answer: %v", err)
	}
	<-c.Done()
	if err := c.Join(t.Context(), "a:b", "c:d"); err == nil {
		t.Error("join on a closed channel succeeded")
	}
	c.Close()

	ok := newFakeMSR(t, mixerOK)
	p := NewPool(Config{})
	defer p.Close()
	c1, err := p.Get(t.Context(), ok.addr())
	if err != nil {
		t.Fatal(err)
	}
	if c2, _ := p.Get(t.Context(), ok.addr()); c2 != c1 {
		t.Error("a second Get dialled again")
	}
	ok.dropAll()
	<-c1.Done()
	c3, err := p.Get(t.Context(), ok.addr())
	if err != nil || c3 == c1 {
		t.Fatalf("Get after the channel dropped: %v (same conn: %v)", err, c3 == c1)
	}
	if err := c3.Join(t.Context(), "a:b", "c:d"); err != nil {
		t.Error(err)
	}
}

// The keep-alive goes out on its own at a third of the granted interval.
func TestKeepAliveSent(t *testing.T) {
	s := newFakeMSR(t, mixerOK)
	s.grant = "1"
	c, err := Dial(t.Context(), Config{Addr: s.addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case <-s.kal:
	case <-time.After(5 * time.Second):
		t.Fatal("no K-ALIVE within 5 s with a 1 s Keep-Alive")
	}
}

// The server's own K-ALIVE is answered 200, other requests 405.
func TestServerRequestsAnswered(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []int, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		sc, err := ln.Accept()
		if err != nil {
			return
		}
		defer sc.Close()
		r := bufio.NewReader(sc)
		f, _ := msr.ReadFrame(r)
		sc.Write((&msr.Frame{TransID: f.TransID, Status: 200}).Marshal())
		sc.Write((&msr.Frame{TransID: "srv1", Method: "K-ALIVE"}).Marshal())
		sc.Write((&msr.Frame{TransID: "srv2", Method: "CONTROL"}).Marshal())
		var codes []int
		for len(codes) < 2 {
			f, err := msr.ReadFrame(r)
			if err != nil {
				break
			}
			if f.Method == "" {
				codes = append(codes, f.Status)
			}
		}
		got <- codes
	})
	c, err := Dial(t.Context(), Config{Addr: netip.MustParseAddrPort(ln.Addr().String())})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if codes := <-got; len(codes) != 2 || codes[0] != 200 || codes[1] != 405 {
		t.Errorf("answers to the server's requests: %v, want [200 405]", codes)
	}
}
