package resolve

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/outpost/outpost/gateway/siptest"
)

// testDNS is an in-process authoritative DNS server on 127.0.0.1 (UDP and TCP
// on the same port) serving a small zone held in memory.
type testDNS struct {
	t    testing.TB
	addr string

	mu      sync.Mutex
	records map[string][]dns.RR // lower-case owner FQDN → records
	extra   map[string][]dns.RR // "name/TYPE" → additional section
	counts  map[string]int      // "name/TYPE/net" → queries seen

	servfail    atomic.Bool
	truncOver   atomic.Int32 // UDP answers with more records are truncated (0 = never)
	udp, tcp    *dns.Server
	running     bool
	soaTTL      uint32
	handlerWait chan struct{} // when non-nil, handlers block until it is closed
}

func startDNS(t testing.TB) *testDNS {
	t.Helper()
	d := &testDNS{
		t:       t,
		records: make(map[string][]dns.RR),
		extra:   make(map[string][]dns.RR),
		counts:  make(map[string]int),
		soaTTL:  30,
	}
	var pc net.PacketConn
	var l net.Listener
	for i := 0; ; i++ {
		var err error
		pc, err = net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l, err = net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			break
		}
		pc.Close()
		if i == 20 {
			t.Fatalf("no port free for UDP and TCP: %v", err)
		}
	}
	d.addr = pc.LocalAddr().String()
	d.serve(pc, l)
	t.Cleanup(d.stop)
	return d
}

func (d *testDNS) serve(pc net.PacketConn, l net.Listener) {
	d.t.Helper()
	h := dns.NewServeMux()
	h.HandleFunc(".", d.handle)
	d.udp = &dns.Server{PacketConn: pc, Handler: h}
	d.tcp = &dns.Server{Listener: l, Handler: h}
	for _, s := range []*dns.Server{d.udp, d.tcp} {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		errc := make(chan error, 1)
		go func() { errc <- s.ActivateAndServe() }()
		select {
		case <-started:
		case err := <-errc:
			d.t.Fatalf("dns server: %v", err)
		}
	}
	d.running = true
}

// stop shuts the server down; its port is closed (queries are refused).
func (d *testDNS) stop() {
	if !d.running {
		return
	}
	d.running = false
	d.udp.Shutdown()
	d.tcp.Shutdown()
}

// restart serves again on the same address.
func (d *testDNS) restart() {
	d.t.Helper()
	pc, err := net.ListenPacket("udp", d.addr)
	if err != nil {
		d.t.Fatal(err)
	}
	l, err := net.Listen("tcp", d.addr)
	if err != nil {
		d.t.Fatal(err)
	}
	d.serve(pc, l)
}

// add adds zone-file records, e.g. "a.hq.test. 60 IN A 192.0.2.1".
func (d *testDNS) add(rrs ...string) {
	d.t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range rrs {
		rr, err := dns.NewRR(s)
		if err != nil {
			d.t.Fatalf("%q: %v", s, err)
		}
		n := strings.ToLower(rr.Header().Name)
		d.records[n] = append(d.records[n], rr)
	}
}

// addExtra puts records in the additional section of answers to (name, qtype).
func (d *testDNS) addExtra(name string, qtype uint16, rrs ...string) {
	d.t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	k := key(name, qtype)
	for _, s := range rrs {
		rr, err := dns.NewRR(s)
		if err != nil {
			d.t.Fatalf("%q: %v", s, err)
		}
		d.extra[k] = append(d.extra[k], rr)
	}
}

func (d *testDNS) remove(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.records, strings.ToLower(dns.Fqdn(name)))
}

func key(name string, qtype uint16) string {
	return strings.ToLower(dns.Fqdn(name)) + "/" + dns.TypeToString[qtype]
}

// count returns the queries seen for (name, qtype) over net ("" = both).
func (d *testDNS) count(name string, qtype uint16, network string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := key(name, qtype)
	if network != "" {
		return d.counts[k+"/"+network]
	}
	return d.counts[k+"/udp"] + d.counts[k+"/tcp"]
}

func (d *testDNS) total() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, c := range d.counts {
		n += c
	}
	return n
}

func (d *testDNS) handle(w dns.ResponseWriter, req *dns.Msg) {
	network := "tcp"
	if _, ok := w.RemoteAddr().(*net.UDPAddr); ok {
		network = "udp"
	}
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	if len(req.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)

	d.mu.Lock()
	d.counts[key(name, q.Qtype)+"/"+network]++
	wait := d.handlerWait
	var answer []dns.RR
	rrs, exists := d.records[name]
	for _, rr := range rrs {
		if rr.Header().Rrtype == q.Qtype || rr.Header().Rrtype == dns.TypeCNAME {
			answer = append(answer, rr)
		}
	}
	// Follow one CNAME level inside the zone.
	if len(answer) == 1 {
		if c, ok := answer[0].(*dns.CNAME); ok && q.Qtype != dns.TypeCNAME {
			for _, rr := range d.records[strings.ToLower(c.Target)] {
				if rr.Header().Rrtype == q.Qtype {
					answer = append(answer, rr)
				}
			}
		}
	}
	extra := d.extra[key(name, q.Qtype)]
	soaTTL := d.soaTTL
	d.mu.Unlock()

	if wait != nil {
		<-wait
	}
	if d.servfail.Load() {
		m.Rcode = dns.RcodeServerFailure
		w.WriteMsg(m)
		return
	}
	if n := int(d.truncOver.Load()); n > 0 && network == "udp" && len(answer) > n {
		m.Truncated = true
		w.WriteMsg(m)
		return
	}
	if !exists {
		m.Rcode = dns.RcodeNameError
	}
	m.Answer = answer
	m.Extra = append(m.Extra, extra...)
	if len(answer) == 0 {
		soa, _ := dns.NewRR(fmt.Sprintf("test. %d IN SOA ns.test. host.test. 1 3600 600 86400 %d", soaTTL, soaTTL))
		m.Ns = []dns.RR{soa}
	}
	if o := req.IsEdns0(); o != nil {
		m.SetEdns0(o.UDPSize(), false)
	}
	w.WriteMsg(m)
}

// deadUDP returns a 127.0.0.1 address whose UDP port is closed.
func deadUDP(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := pc.LocalAddr().String()
	pc.Close()
	return a
}

// silentUDP returns a 127.0.0.1 address that reads queries and never answers.
func silentUDP(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc.LocalAddr().String()
}

func newClock() *siptest.Clock {
	return siptest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
}
