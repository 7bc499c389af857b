package msr

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
	"github.com/icholy/digest"
)

// record is one REGISTER as the test registrar received it.
type record struct {
	req    *sip.Request
	src    string         // source address (the agent's socket)
	local  netip.AddrPort // registrar address it arrived on
	at     time.Time
	authed bool // carried valid credentials
	answer int  // status sent back (0 = dropped)
}

func (r record) hdr(name string) string {
	if h := r.req.GetHeader(name); h != nil {
		return h.Value()
	}
	return ""
}

func (r record) expires() int {
	n, err := strconv.Atoi(r.hdr("Expires"))
	if err != nil {
		return -1
	}
	return n
}

func (r record) iface() string { return r.hdr(DefaultHeaderPrefix + "Iface-Name") }

func (r record) String() string {
	return fmt.Sprintf("REGISTER %s from %s to %v CSeq %d Expires %s Iface %s(%s) Contact %s authed=%v answer=%d",
		r.req.From().Address.String(), r.src, r.local, r.req.CSeq().SeqNo, r.hdr("Expires"),
		r.iface(), r.hdr(DefaultHeaderPrefix+"Iface-Addr"), r.hdr("Contact"), r.authed, r.answer)
}

// registrar is an in-process SIP registrar on one or more loopback (or
// namespace) addresses sharing one port. It records every REGISTER.
type registrar struct {
	t     testing.TB
	addrs []netip.AddrPort
	recs  chan record

	mu        sync.Mutex
	drop      int    // answer none of the next drop REGISTERs
	challenge bool   // ask for digest credentials
	password  string // expected password (user "msr")
	granted   int    // expiry granted; 0 = as asked
}

const testRealm = "hq.test"

// newRegistrar starts a registrar on every ip at one common port, using
// listen to open the sockets (nil = net.ListenPacket).
func newRegistrar(t testing.TB, listen func(network, addr string) (net.PacketConn, error), ips ...string) *registrar {
	t.Helper()
	if listen == nil {
		listen = net.ListenPacket
	}
	r := &registrar{t: t, recs: make(chan record, 4096), password: DefaultPassword}
	var conns []net.PacketConn
	for attempt := 0; ; attempt++ {
		conns = conns[:0]
		port := 0
		ok := true
		for _, ip := range ips {
			c, err := listen("udp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				ok = false
				break
			}
			conns = append(conns, c)
			port = c.LocalAddr().(*net.UDPAddr).Port
		}
		if ok {
			break
		}
		for _, c := range conns {
			_ = c.Close()
		}
		if attempt == 20 {
			t.Fatalf("registrar: no common port for %v", ips)
		}
	}
	// One user agent per address: sipgo answers from the socket that last
	// heard from a peer, so a shared one would answer from the wrong
	// address.
	var wg sync.WaitGroup
	var uas []*sipgo.UserAgent
	for _, c := range conns {
		ua, err := sipgo.NewUA(sipgo.WithUserAgent("test-registrar"))
		if err != nil {
			t.Fatal(err)
		}
		srv, err := sipgo.NewServer(ua)
		if err != nil {
			t.Fatal(err)
		}
		srv.OnRegister(r.handle)
		uas = append(uas, ua)
		r.addrs = append(r.addrs, c.LocalAddr().(*net.UDPAddr).AddrPort())
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = srv.ServeUDP(c)
		}()
	}
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
		wg.Wait()
		for _, ua := range uas {
			_ = ua.Close()
		}
	})
	return r
}

func (r *registrar) set(f func(r *registrar)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

func (r *registrar) handle(req *sip.Request, tx sip.ServerTransaction) {
	r.mu.Lock()
	drop := r.drop > 0
	if drop {
		r.drop--
	}
	challenge, password, granted := r.challenge, r.password, r.granted
	r.mu.Unlock()

	rec := record{req: req.Clone(), src: req.Source(), at: time.Now()}
	if st, ok := tx.(*sip.ServerTx); ok {
		if ua, ok := st.Connection().LocalAddr().(*net.UDPAddr); ok {
			rec.local = ua.AddrPort()
		}
	}
	// Each record is queued before its answer leaves, so records arrive in
	// the order the agent could have caused them.
	if drop {
		r.recs <- rec
		return
	}
	if challenge {
		rec.authed = checkDigest(req, password)
		if !rec.authed {
			res := sip.NewResponseFromRequest(req, sip.StatusUnauthorized, "Unauthorized", nil)
			res.AppendHeader(sip.NewHeader("WWW-Authenticate",
				fmt.Sprintf(`Digest realm="%s", nonce="%s", qop="auth", algorithm=MD5`, testRealm, "n"+req.CallID().Value())))
			rec.answer = 401
			r.recs <- rec
			_ = tx.Respond(res)
			return
		}
	}
	res := sip.NewResponseFromRequest(req, sip.StatusOK, "OK", nil)
	exp := rec.expires()
	if granted > 0 && exp > 0 {
		exp = granted
	}
	if c := req.Contact(); c != nil && exp > 0 {
		cc := c.Clone()
		cc.Params = sip.NewParams()
		cc.Params.Add("expires", strconv.Itoa(exp))
		res.AppendHeader(cc)
	}
	rec.answer = 200
	r.recs <- rec
	_ = tx.Respond(res)
}

// checkDigest verifies the Authorization of req for user msr (RFC 2617
// with qop=auth), as a real registrar would.
func checkDigest(req *sip.Request, password string) bool {
	h := req.GetHeader("Authorization")
	if h == nil {
		return false
	}
	cred, err := digest.ParseCredentials(h.Value())
	if err != nil || cred.Username != DefaultUsername || cred.Realm != testRealm {
		return false
	}
	want, err := digest.Digest(&digest.Challenge{Realm: testRealm, Nonce: "n" + req.CallID().Value(), QOP: []string{"auth"}, Algorithm: "MD5"},
		digest.Options{Method: "REGISTER", URI: cred.URI, Username: DefaultUsername, Password: password, Cnonce: cred.Cnonce, Count: cred.Nc})
	return err == nil && want.Response == cred.Response && cred.URI == req.Recipient.String()
}

// await returns the next record matching match, consuming (and logging)
// the others; it fails the test after 10 s.
func (r *registrar) await(desc string, match func(record) bool) record {
	r.t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case rec := <-r.recs:
			if match(rec) {
				r.t.Logf("got %s: %v", desc, rec)
				return rec
			}
			r.t.Logf("skip %v", rec)
		case <-deadline.C:
			r.t.Fatalf("no %s within 10 s", desc)
		}
	}
}

// registered matches an accepted REGISTER (Expires > 0) of iface.
func registered(iface string) func(record) bool {
	return func(r record) bool { return r.answer == 200 && r.iface() == iface && r.expires() > 0 }
}

// unregistered matches an accepted unREGISTER of iface.
func unregistered(iface string) func(record) bool {
	return func(r record) bool { return r.answer == 200 && r.iface() == iface && r.expires() == 0 }
}

func (r *registrar) server(i int) string { return r.addrs[i].String() }

// waitStatus waits until cond holds for the agent's status, re-checking
// whenever a registration's status changes; it fails after 10 s.
func waitStatus(t testing.TB, a *Agent, desc string, cond func([]UAStatus) bool) []UAStatus {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		st := a.Status()
		if cond(st) {
			return st
		}
		select {
		case <-a.poke:
		case <-deadline.C:
			t.Fatalf("%s: not within 10 s; status %+v", desc, st)
		}
	}
}

// run starts a.Run and stops it at the end of the test, checking it
// returns nil.
func run(t testing.TB, a *Agent) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("Run = %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("Run did not return within 20 s of cancel")
		}
	})
}
