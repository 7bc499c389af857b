package msr

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/media/relay"
	"github.com/outpost/outpost/media/sdprewrite"
)

// relayMedia adapts media/relay to Media, as the appliance does.
type relayMedia struct{ r *relay.Relay }

func (m relayMedia) Open(id string, local netip.Addr, offer []byte, onInactive func(string)) ([]byte, MediaConn, error) {
	e, answer, err := m.r.OpenEndpoint(relay.EndpointConfig{ID: id, Local: local, OnInactive: onInactive}, offer)
	if err != nil {
		return nil, nil, err
	}
	return answer, relayConn{e}, nil
}

type relayConn struct{ e *relay.Endpoint }

func (c relayConn) Update(offer []byte) ([]byte, error) { return c.e.Update(offer) }
func (c relayConn) ForwardTo(to MediaConn) {
	if t, ok := to.(relayConn); ok {
		c.e.ForwardTo(t.e)
		return
	}
	c.e.ForwardTo(nil)
}
func (c relayConn) Counts() (uint64, uint64) { st := c.e.Stats(); return st.Received, st.Forwarded }
func (c relayConn) Close()                   { c.e.Close() }

// mediaRig is an agent with media: wan0 (service) on 127.0.0.1, lan0 on
// 127.0.0.2, a registrar, a relay, a SIP client and a control channel.
type mediaRig struct {
	t      *testing.T
	a      *Agent
	r      *relay.Relay
	client *sipgo.Client
	local  netip.AddrPort // the agent's SIP socket
}

func newMediaRig(t *testing.T, inactivity time.Duration) *mediaRig {
	t.Helper()
	return newMediaRigCfg(t, inactivity, nil)
}

// newMediaRigCfg is newMediaRig with the agent's configuration adjusted
// by adjust (if set).
func newMediaRigCfg(t *testing.T, inactivity time.Duration, adjust func(*Config)) *mediaRig {
	t.Helper()
	reg := newRegistrar(t, nil, "127.0.0.1")
	n := newNetState(t)
	n.link(idxLo, "lo", "loopback", true).addr(idxLo, "127.0.0.1/8")
	n.link(idxWAN, "wan0", "veth", true).addr(idxWAN, "127.0.0.1/8")
	n.link(idxLAN, "lan0", "veth", true).addr(idxLAN, "127.0.0.2/8")
	r, err := relay.New(relay.Config{PortMin: 43000, PortMax: 44999, Codecs: []string{"PCMU", "PCMA", "telephone-event"}, InactivityTimeout: inactivity}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	cfg := testConfig(reg.server(0))
	if adjust != nil {
		adjust(&cfg)
	}
	a := newAgent(t, cfg, n, WithMedia(relayMedia{r}))
	run(t, a)
	collect(t, reg, "wan0", "lan0")
	// The REGISTERs leave during the pass that publishes the service
	// status at its end: wait for that too.
	for deadline := time.Now().Add(5 * time.Second); !a.Service().Local.IsValid(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no service address published")
		}
	}
	ua, err := sipgo.NewUA()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ua.Close() })
	cl, err := sipgo.NewClient(ua, sipgo.WithClientHostname("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	return &mediaRig{t: t, a: a, r: r, client: cl, local: a.Service().Local}
}

// dialog is the test's side of one INVITE dialog.
type dialog struct {
	callID, fromTag, toTag string
	uri                    sip.Uri
	cseq                   uint32
	answer                 sdprewrite.Media
}

func (d *dialog) id() string { return d.toTag + ":" + d.fromTag }

func (m *mediaRig) request(method sip.RequestMethod, d *dialog, body []byte) *sip.Response {
	m.t.Helper()
	req := sip.NewRequest(method, d.uri)
	req.SetTransport("UDP")
	req.SetDestination(m.local.String())
	from := &sip.FromHeader{Address: sip.Uri{Scheme: "sip", User: "hq", Host: "127.0.0.1"}, Params: sip.NewParams()}
	from.Params.Add("tag", d.fromTag)
	to := &sip.ToHeader{Address: d.uri, Params: sip.NewParams()}
	if d.toTag != "" {
		to.Params.Add("tag", d.toTag)
	}
	cid := sip.CallIDHeader(d.callID)
	d.cseq++
	req.AppendHeader(from)
	req.AppendHeader(to)
	req.AppendHeader(&cid)
	req.AppendHeader(&sip.CSeqHeader{SeqNo: d.cseq, MethodName: method})
	req.AppendHeader(&sip.ContactHeader{Address: sip.Uri{Scheme: "sip", User: "hq", Host: "127.0.0.1", Port: 5999}})
	if body != nil {
		req.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
		req.SetBody(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := m.client.Do(ctx, req)
	if err != nil {
		m.t.Fatalf("%s: %v", method, err)
	}
	if method == sip.INVITE && res.StatusCode == 200 {
		if tag, ok := res.To().Params.Get("tag"); ok {
			d.toTag = tag
		}
		if !strings.Contains(string(res.Body()), "m=audio") {
			return res // a control-channel answer
		}
		sd, err := sdprewrite.Parse(res.Body())
		if err != nil {
			m.t.Fatalf("answer SDP: %v\n%s", err, res.Body())
		}
		d.answer = sd.Audio
	}
	return res
}

// invite opens a connection to UA iface from p with the given formats.
func (m *mediaRig) invite(iface string, p *rtpPeer, formats ...string) (*dialog, int) {
	d := &dialog{callID: randHex(8), fromTag: randHex(4),
		uri: sip.Uri{Scheme: "sip", User: iface + ";1", Host: m.local.Addr().String(), Port: int(m.local.Port())}}
	res := m.request(sip.INVITE, d, p.sdp(formats...))
	return d, res.StatusCode
}

// rtpPeer is a test RTP endpoint.
type rtpPeer struct {
	t    *testing.T
	c    *net.UDPConn
	seq  uint16
	recv atomic.Uint64
	pts  chan uint8
}

func newPeer(t *testing.T, ip string) *rtpPeer {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(ip)})
	if err != nil {
		t.Fatal(err)
	}
	p := &rtpPeer{t: t, c: c, pts: make(chan uint8, 1024)}
	t.Cleanup(func() { c.Close() })
	go func() {
		b := make([]byte, 1500)
		for {
			n, err := c.Read(b)
			if err != nil {
				return
			}
			if n >= 12 {
				p.recv.Add(1)
				select {
				case p.pts <- b[1] & 0x7F:
				default:
				}
			}
		}
	}()
	return p
}

func (p *rtpPeer) addr() netip.AddrPort { return p.c.LocalAddr().(*net.UDPAddr).AddrPort() }

func (p *rtpPeer) sdp(formats ...string) []byte {
	a := p.addr()
	var pts []string
	s := ""
	for _, f := range formats {
		pt, name, _ := strings.Cut(f, " ")
		pts = append(pts, pt)
		s += fmt.Sprintf("a=rtpmap:%s %s/8000\r\n", pt, name)
	}
	return []byte(fmt.Sprintf("v=0\r\no=hq 1 1 IN IP4 %s\r\ns=-\r\nc=IN IP4 %s\r\nt=0 0\r\nm=audio %d RTP/AVP %s\r\n%s",
		a.Addr(), a.Addr(), a.Port(), strings.Join(pts, " "), s))
}

func (p *rtpPeer) send(to sdprewrite.Media, pt uint8, n int) {
	for range n {
		b := make([]byte, 12+160)
		b[0], b[1] = 0x80, pt
		b[2], b[3] = byte(p.seq>>8), byte(p.seq)
		p.seq++
		if _, err := p.c.WriteToUDPAddrPort(b, netip.AddrPortFrom(to.Addr, uint16(to.Port))); err != nil {
			p.t.Fatal(err)
		}
	}
}

// expect waits until p has received want packets in all.
func (p *rtpPeer) expect(what string, want uint64) {
	p.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for p.recv.Load() < want {
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: received %d packets, want %d", what, p.recv.Load(), want)
		}
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if got := p.recv.Load(); got != want {
		p.t.Fatalf("%s: received %d packets, want exactly %d", what, got, want)
	}
}

func (m *mediaRig) control() *cfwClient {
	m.t.Helper()
	c := dialFrom(m.t, m.a.Control().Listen, "")
	return c
}

func mixer(c *cfwClient, id, body string) (*Frame, string) {
	c.t.Helper()
	f := c.do(Frame{TransID: id, Method: "CONTROL", Header: []Field{{"Control-Package", mixerPackage}, {"Content-Type", mixerContentType}},
		Body: []byte(`<mscmixer version="1.0" xmlns="urn:ietf:params:xml:ns:msc-mixer">` + body + `</mscmixer>`)})
	return f, string(f.Body)
}

func wantStatus(t *testing.T, what, body string, status int) {
	t.Helper()
	if !strings.Contains(body, fmt.Sprintf(`status="%d"`, status)) {
		t.Fatalf("%s: want status %d, got %s", what, status, body)
	}
}

func TestMediaJoinOverControlChannel(t *testing.T) {
	m := newMediaRig(t, 0)
	p1, p2 := newPeer(t, "127.0.0.5"), newPeer(t, "127.0.0.6")
	d1, code := m.invite("wan0", p1, "0 PCMU", "101 telephone-event")
	if code != 200 || d1.answer.Addr != netip.MustParseAddr("127.0.0.1") || !d1.answer.Codecs[0].Is("PCMU") {
		t.Fatalf("INVITE wan0: %d %+v", code, d1.answer)
	}
	d2, code := m.invite("lan0", p2, "8 PCMA")
	if code != 200 || d2.answer.Addr != netip.MustParseAddr("127.0.0.2") || !d2.answer.Codecs[0].Is("PCMA") {
		t.Fatalf("INVITE lan0: %d %+v", code, d2.answer)
	}
	if got := m.r.PortsInUse(); got != 4 {
		t.Fatalf("ports in use %d, want 4", got)
	}
	c := m.control()
	// CONTROL before SYNC: 406, out of sequence (RFC 6230 §6: SYNC comes first; §8).
	if f := c.do(Frame{TransID: "ctl0000", Method: "CONTROL", Header: []Field{{"Control-Package", mixerPackage}}, Body: []byte("<x/>")}); f.Status != 406 {
		t.Fatalf("CONTROL before SYNC: %d", f.Status)
	}
	s := c.do(Frame{TransID: "sync0001", Method: "SYNC", Header: []Field{{"Dialog-ID", "d1"}, {"Keep-Alive", "100"}, {"Packages", "msc-mixer/1.0"}}})
	if pk, _ := s.Get("Packages"); s.Status != 200 || pk != mixerPackage {
		t.Fatalf("SYNC: %+v", s)
	}
	// Unknown package: 420, the supported ones named.
	if f := c.do(Frame{TransID: "ctl0001", Method: "CONTROL", Header: []Field{{"Control-Package", "msc-ivr/1.0"}}, Body: []byte("<mscivr/>")}); f.Status != 420 {
		t.Fatalf("msc-ivr: %d", f.Status)
	} else if v, _ := f.Get("Supported"); v != mixerPackage {
		t.Fatalf("420 without Supported: %+v", f)
	}
	for i, bad := range []string{"", "<join", `<join id1="a:b"/>`, `<join id1="a:b" id2="c:d"><stream media="video"/></join>`, `<join/><unjoin/>`} {
		f, body := mixer(c, fmt.Sprintf("bad%04d", i), bad)
		if f.Status != 200 {
			t.Fatalf("bad body %q: CFW %d", bad, f.Status)
		}
		if !strings.Contains(body, `status="400"`) && !strings.Contains(body, `status="422"`) {
			t.Fatalf("bad body %q: %s", bad, body)
		}
	}
	_, body := mixer(c, "join0001", fmt.Sprintf(`<join id1="%s" id2="no:such"/>`, d1.id()))
	wantStatus(t, "unknown connection", body, 412)
	_, body = mixer(c, "join0002", fmt.Sprintf(`<join id1="%s" id2="conf1"/>`, d1.id()))
	wantStatus(t, "conference", body, 406)

	// Before the join nothing crosses.
	p1.send(d1.answer, 0, 5)
	time.Sleep(50 * time.Millisecond)
	if p2.recv.Load() != 0 {
		t.Fatal("media crossed before join")
	}
	f, body := mixer(c, "join0003", fmt.Sprintf(`<join id1="%s" id2="%s"/>`, d1.id(), d2.id()))
	if f.TransID != "join0003" {
		t.Fatal("trans id")
	}
	wantStatus(t, "join", body, 200)
	_, body = mixer(c, "join0004", fmt.Sprintf(`<join id1="%s" id2="%s"/>`, d2.id(), d1.id()))
	wantStatus(t, "join again", body, 408)
	p1.send(d1.answer, 0, 10)
	p2.expect("p1→p2", 10)
	if pt := <-p2.pts; pt != 8 {
		t.Fatalf("p2 got payload type %d, want 8 (transcoded to A-law)", pt)
	}
	p2.send(d2.answer, 8, 7)
	p1.expect("p2→p1", 7)
	// Tags in the softswitch's order are the same connection.
	_, body = mixer(c, "aud00001", `<audit/>`)
	if !strings.Contains(body, `<joinaudit`) || !strings.Contains(body, `direction="sendrecv"`) {
		t.Fatalf("audit: %s", body)
	}
	// recvonly: media from id2 to id1 only.
	_, body = mixer(c, "mod00001", fmt.Sprintf(`<modifyjoin id1="%s" id2="%s"><stream media="audio" direction="recvonly"/></modifyjoin>`, d1.fromTag+":"+d1.toTag, d2.id()))
	wantStatus(t, "modifyjoin", body, 200)
	p1.send(d1.answer, 0, 10)
	p2.send(d2.answer, 8, 3)
	p1.expect("p2→p1 after recvonly", 10)
	p2.expect("p1→p2 after recvonly", 10)
	_, body = mixer(c, "unj00001", fmt.Sprintf(`<unjoin id1="%s" id2="%s"/>`, d1.id(), d2.id()))
	wantStatus(t, "unjoin", body, 200)
	_, body = mixer(c, "unj00002", fmt.Sprintf(`<unjoin id1="%s" id2="%s"/>`, d1.id(), d2.id()))
	wantStatus(t, "unjoin again", body, 409)
	p1.send(d1.answer, 0, 4)
	p2.send(d2.answer, 8, 4)
	p1.expect("after unjoin", 10)
	p2.expect("after unjoin", 10)

	// re-INVITE moves connection 1 to another peer.
	p3 := newPeer(t, "127.0.0.7")
	if res := m.request(sip.INVITE, d1, p3.sdp("8 PCMA")); res.StatusCode != 200 {
		t.Fatalf("re-INVITE: %d", res.StatusCode)
	}
	_, body = mixer(c, "join0005", fmt.Sprintf(`<join id1="%s" id2="%s"/>`, d1.id(), d2.id()))
	wantStatus(t, "join after re-INVITE", body, 200)
	p2.send(d2.answer, 8, 6)
	p3.expect("p2→p3 after re-INVITE", 6)

	// BYE frees the ports and unjoins.
	for _, d := range []*dialog{d1, d2} {
		if res := m.request(sip.BYE, d, nil); res.StatusCode != 200 {
			t.Fatalf("BYE: %d", res.StatusCode)
		}
	}
	if got := m.r.PortsInUse(); got != 0 {
		t.Fatalf("ports in use after BYE: %d", got)
	}
	if res := m.request(sip.BYE, d1, nil); res.StatusCode != 481 {
		t.Fatalf("second BYE: %d", res.StatusCode)
	}
	_, body = mixer(c, "join0006", fmt.Sprintf(`<join id1="%s" id2="%s"/>`, d1.id(), d2.id()))
	wantStatus(t, "join after BYE", body, 412)
}

func TestMediaConnectionsNoLeak(t *testing.T) {
	m := newMediaRig(t, 0)
	p := newPeer(t, "127.0.0.5")
	if _, code := m.invite("wan0", p, "18 G729"); code != 488 {
		t.Fatalf("G.729 only: %d, want 488", code)
	}
	if _, code := m.invite("nope0", p, "0 PCMU"); code != 404 {
		t.Fatalf("unknown interface: %d, want 404", code)
	}
	for i := range 50 {
		d, code := m.invite([]string{"wan0", "lan0"}[i%2], p, "0 PCMU")
		if code != 200 {
			t.Fatalf("INVITE %d: %d", i, code)
		}
		if res := m.request(sip.BYE, d, nil); res.StatusCode != 200 {
			t.Fatalf("BYE %d: %d", i, res.StatusCode)
		}
	}
	if got := m.r.PortsInUse(); got != 0 || len(m.a.MediaConnections()) != 0 {
		t.Fatalf("after 50 connections: %d ports, %d connections", got, len(m.a.MediaConnections()))
	}
}

func TestMediaInactivityFreesPorts(t *testing.T) {
	m := newMediaRig(t, 300*time.Millisecond)
	p := newPeer(t, "127.0.0.5")
	if _, code := m.invite("wan0", p, "0 PCMU"); code != 200 {
		t.Fatalf("INVITE: %d", code)
	}
	deadline := time.Now().Add(5 * time.Second)
	for m.r.PortsInUse() != 0 || len(m.a.MediaConnections()) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("inactive connection not freed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
