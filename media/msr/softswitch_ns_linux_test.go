package msr

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/textproto"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pion/rtp"
	"github.com/vishvananda/netns"

	"github.com/outpost/outpost/internal/testenv"
	"github.com/outpost/outpost/media/relay"
	"github.com/outpost/outpost/media/sdprewrite"
	"github.com/outpost/outpost/netcfg"
	"github.com/outpost/outpost/netcfg/netnstest"
)

// The MSR as the softswitch uses it, on a real kernel (issue 17 item 5):
//
//	ns hq:     hq0 198.18.0.2 — registrar, SIPp (the softswitch), the control client
//	ns box:    wan0 198.18.0.1 (service), vlan10 198.18.10.1, vlan20 198.18.20.1
//	ns vlan10: v10p 198.18.10.2 — an RTP endpoint SIPp announces
//	ns vlan20: v20p 198.18.20.2 — the other one
//
// The two "VLANs" are veth pairs into their own namespaces: this
// kernel has no 802.1Q module, and what matters here is that the box has
// two interfaces whose peers cannot reach each other but through it.
//
// SIPp sets up the control channel as RFC 6230 §5 says (an INVITE
// offering a cfw m-line; the agent requires it: ControlDialogRequired),
// then one media connection on each VLAN interface; the test's control
// client (RFC 6230 framing written out by hand, so the package's own
// parser does not check itself) SYNCs and joins them; RTP from the two
// VLAN namespaces crosses the box both ways; modifyjoin recvonly stops
// one way, unjoin both; SIPp's BYEs free the ports; the BYE of the control
// dialog closes the channel; then 200 INVITE/BYE connections leave no
// port behind.
func TestNamespaceSoftswitchJoins(t *testing.T) {
	sipp := testenv.NeedTool(t, "sipp") // the softswitch of this test
	b := newNSBox(t, 10*time.Millisecond)
	tp := b.topo
	for _, v := range []struct{ name, box, peer string }{{"vlan10", "198.18.10.1/24", "198.18.10.2/24"}, {"vlan20", "198.18.20.1/24", "198.18.20.2/24"}} {
		peerIf := "v" + strings.TrimPrefix(v.name, "vlan") + "p"
		tp.Veth("box", v.name, v.name, peerIf)
		tp.Addr("box", v.name, v.box)
		tp.Addr(v.name, peerIf, v.peer)
		tp.Up(v.name, peerIf)
		tp.Up("box", v.name)
	}
	box, hq := b.box, b.hq

	r, err := relay.New(relay.Config{PortMin: 40000, PortMax: 40999, Codecs: []string{"PCMU", "PCMA", "telephone-event"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(context.Background())
	rdone := make(chan struct{})
	go func() { _ = r.Run(rctx); close(rdone) }()
	t.Cleanup(func() { rcancel(); <-rdone })
	media := &nsRelayMedia{m: relayMedia{r}, ns: box, answers: map[string][]byte{}}
	cfg := Config{
		Enabled: true, Name: "msr-ns", Servers: []string{b.reg.server(0)}, ServiceInterface: "wan0",
		Interfaces: []string{"wan0", "vlan*"}, RegisterInterval: time.Hour, RetryInterval: time.Hour,
		ControlPort: -1, ControlDialogRequired: true, Debounce: 20 * time.Millisecond, Timeout: 5 * time.Second,
	}
	a, err := New(cfg, b.ch, netcfg.State{}, nil, WithSockets(nsSockets{box}), WithMedia(media), WithLoad(func() int { return 5 }))
	if err != nil {
		t.Fatal(err)
	}
	run(t, a)
	collect(t, b.reg, "wan0", "vlan10", "vlan20")
	sipAddr, ctlAddr := a.Service().Local, a.Control().Listen
	if sipAddr.Addr() != netip.MustParseAddr("198.18.0.1") || ctlAddr.Addr() != sipAddr.Addr() {
		t.Fatalf("SIP socket %v, control listener %v", sipAddr, ctlAddr)
	}

	// The control-channel dialog.
	cc := startSIPp(t, tp, sipp, "control_dialog.xml", 5071, sipAddr, "ecss-cc-1;wan0\n", "-m", "1")
	ctlDlg := awaitCond(t, "the control dialog", func() (*ctlDialog, bool) {
		a.ms.mu.Lock()
		defer a.ms.mu.Unlock()
		d := a.ms.ctlDlgs["ecss-cc-1"]
		return d, d != nil
	})

	// Two media connections, announcing RTP endpoints in the VLANs.
	p10 := newNSPeer(t, tp.Handle("vlan10"), "198.18.10.2")
	p20 := newNSPeer(t, tp.Handle("vlan20"), "198.18.20.2")
	held := startSIPp(t, tp, sipp, "media_held.xml", 5070, sipAddr,
		fmt.Sprintf("vlan10;198.18.10.2;%d\nvlan20;198.18.20.2;%d\n", p10.addr.Port(), p20.addr.Port()), "-m", "2", "-l", "2")
	conns := awaitCond(t, "two media connections", func() (map[string]MediaConnection, bool) {
		m := map[string]MediaConnection{}
		for _, c := range a.MediaConnections() {
			m[c.Interface] = c
		}
		return m, len(m) == 2
	})
	c10, c20 := conns["vlan10"], conns["vlan20"]
	if n := r.PortsInUse(); n != 4 {
		t.Fatalf("ports in use %d, want 4", n)
	}
	to10, to20 := media.answer(t, c10.ID), media.answer(t, c20.ID)
	if to10.Addr != netip.MustParseAddr("198.18.10.1") || to20.Addr != netip.MustParseAddr("198.18.20.1") {
		t.Fatalf("answers on %v and %v, want the VLAN interfaces' addresses", to10.Addr, to20.Addr)
	}

	// The control channel: only the dialog's cfw-id is accepted.
	ctl := dialCFW(t, hq, ctlAddr)
	if st, _, _ := ctl.request("SYNC", "Dialog-ID: not-a-dialog\r\nKeep-Alive: 100\r\nPackages: msc-mixer/1.0\r\n", ""); st != 481 {
		t.Fatalf("SYNC naming no dialog: %d, want 481", st)
	}
	if st, _, _ := ctl.request("SYNC", "Dialog-ID: ecss-cc-1\r\nKeep-Alive: 100\r\nPackages: msc-mixer/1.0\r\n", ""); st != 200 {
		t.Fatalf("SYNC: %d", st)
	}
	mix := func(what, req string) {
		t.Helper()
		st, h, body := ctl.request("CONTROL", "Control-Package: msc-mixer/1.0\r\nContent-Type: application/msc-mixer+xml\r\n",
			`<mscmixer version="1.0" xmlns="urn:ietf:params:xml:ns:msc-mixer">`+req+`</mscmixer>`)
		if st != 200 || h.Get("Content-Type") != "application/msc-mixer+xml" || !strings.Contains(body, `<response status="200"`) {
			t.Fatalf("%s: CFW %d %v %s", what, st, h, body)
		}
	}

	// Nothing crosses before the join.
	p10.send(t, to10, 5)
	awaitCounts(t, a, c10.ID, 5)
	mix("join", fmt.Sprintf(`<join id1="%s" id2="%s"/>`, c10.ID, c20.ID))
	p10.send(t, to10, 20)
	p20.await(t, "vlan10 → vlan20", 20)
	p20.send(t, to20, 15)
	p10.await(t, "vlan20 → vlan10", 15)

	// recvonly, seen from id1 (vlan10): only vlan20 → vlan10 flows.
	mix("modifyjoin", fmt.Sprintf(`<modifyjoin id1="%s" id2="%s"><stream media="audio" direction="recvonly"/></modifyjoin>`, c10.ID, c20.ID))
	p10.send(t, to10, 10)
	awaitCounts(t, a, c10.ID, 5+20+10)
	p20.send(t, to20, 7)
	p10.await(t, "vlan20 → vlan10 after recvonly", 15+7)
	// unjoin: neither way.
	mix("unjoin", fmt.Sprintf(`<unjoin id1="%s" id2="%s"/>`, c10.ID, c20.ID))
	p10.send(t, to10, 4)
	p20.send(t, to20, 6)
	awaitCounts(t, a, c10.ID, 5+20+10+4)
	awaitCounts(t, a, c20.ID, 15+7+6)
	if n10, n20 := p10.n.Load(), p20.n.Load(); n10 != 22 || n20 != 20 {
		t.Fatalf("after recvonly and unjoin the VLANs received %d and %d packets, want 22 and 20", n10, n20)
	}
	for _, c := range a.MediaConnections() {
		want := map[string]uint64{"vlan10": 20, "vlan20": 22}[c.Interface]
		if c.Forwarded != want {
			t.Errorf("%s forwarded %d, want %d", c.Interface, c.Forwarded, want)
		}
	}

	// The softswitch hangs up: the ports are free.
	for _, c := range []MediaConnection{c10, c20} {
		sendINFO(t, hq, 5070, c)
	}
	held.wait(t)
	if n, cs := r.PortsInUse(), a.MediaConnections(); n != 0 || len(cs) != 0 {
		t.Fatalf("after BYE: %d ports, connections %+v", n, cs)
	}
	// The control dialog ends: its channel is closed.
	sendINFO(t, hq, 5071, MediaConnection{ID: ctlDlg.key.localTag + ":" + ctlDlg.key.remoteTag, CallID: ctlDlg.key.callID})
	cc.wait(t)
	if line, err := ctl.r.ReadLine(); err != io.EOF {
		t.Fatalf("control channel after the dialog's BYE: %q, %v", line, err)
	}

	// 200 connections, none leaked.
	var csv strings.Builder
	for i := range 200 {
		fmt.Fprintf(&csv, "vlan%d;198.18.%d.2;%d\n", 10+10*(i%2), 10+10*(i%2), 30000+2*i)
	}
	loop := startSIPp(t, tp, sipp, "media_loop.xml", 5072, sipAddr, csv.String(), "-m", "200", "-l", "20", "-r", "100")
	loop.wait(t)
	if n, cs := r.PortsInUse(), a.MediaConnections(); n != 0 || len(cs) != 0 {
		t.Fatalf("after 200 INVITE/BYE: %d ports, %d connections", n, len(cs))
	}
	if st := a.Control(); st.Accepted != 1 || len(st.Channels) != 0 {
		t.Errorf("control status %+v", st)
	}
}

// nsRelayMedia opens relay endpoints with their sockets in the box's
// namespace (the appliance runs there; the test does not), and keeps
// each answer: where the softswitch was told to send.
type nsRelayMedia struct {
	m  relayMedia
	ns netns.NsHandle

	mu      sync.Mutex
	answers map[string][]byte
}

func (m *nsRelayMedia) Open(id string, local netip.Addr, offer []byte, onInactive func(string)) (answer []byte, c MediaConn, err error) {
	err = inNS(m.ns, func() error {
		var e error
		answer, c, e = m.m.Open(id, local, offer, onInactive)
		return e
	})
	if err == nil {
		m.mu.Lock()
		m.answers[id] = answer
		m.mu.Unlock()
	}
	return answer, c, err
}

func (m *nsRelayMedia) answer(t *testing.T, id string) sdprewrite.Media {
	t.Helper()
	m.mu.Lock()
	b := m.answers[id]
	m.mu.Unlock()
	sd, err := sdprewrite.Parse(b)
	if err != nil {
		t.Fatalf("answer of %s: %v", id, err)
	}
	return sd.Audio
}

// awaitCond polls f (no event announces what it waits for) for 10 s.
func awaitCond[T any](t *testing.T, what string, f func() (T, bool)) T {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, ok := f()
		if ok {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitCounts waits until connection id has received want RTP packets
// from its remote side.
func awaitCounts(t *testing.T, a *Agent, id string, want uint64) {
	t.Helper()
	awaitCond(t, fmt.Sprintf("%s received %d", id, want), func() (struct{}, bool) {
		for _, c := range a.MediaConnections() {
			if c.ID == id {
				return struct{}{}, c.Received >= want
			}
		}
		return struct{}{}, false
	})
}

// nsPeer is an RTP endpoint in a VLAN namespace, counting what arrives.
type nsPeer struct {
	c    net.PacketConn
	addr netip.AddrPort
	seq  uint16
	n    atomic.Uint64
	got  chan struct{} // one slot: a packet arrived
}

func newNSPeer(t *testing.T, ns netns.NsHandle, ip string) *nsPeer {
	t.Helper()
	c, err := nsSockets{ns}.ListenPacket(context.Background(), "udp4", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	p := &nsPeer{c: c, addr: c.LocalAddr().(*net.UDPAddr).AddrPort(), got: make(chan struct{}, 1)}
	done := make(chan struct{})
	t.Cleanup(func() { c.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, _, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			var pkt rtp.Packet
			if pkt.Unmarshal(buf[:n]) == nil {
				p.n.Add(1)
				select {
				case p.got <- struct{}{}:
				default:
				}
			}
		}
	}()
	return p
}

func (p *nsPeer) send(t *testing.T, to sdprewrite.Media, n int) {
	t.Helper()
	dst := net.UDPAddrFromAddrPort(netip.AddrPortFrom(to.Addr, uint16(to.Port)))
	for range n {
		p.seq++
		pkt := rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 0, SequenceNumber: p.seq, Timestamp: uint32(p.seq) * 160, SSRC: 0x5eed},
			Payload: bytes.Repeat([]byte{0xff}, 160)}
		b, err := pkt.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.c.WriteTo(b, dst); err != nil {
			t.Fatal(err)
		}
	}
}

// await waits until the peer has received want packets in all.
func (p *nsPeer) await(t *testing.T, what string, want uint64) {
	t.Helper()
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	for p.n.Load() < want {
		select {
		case <-p.got:
		case <-deadline.C:
			t.Fatalf("%s: %d packets arrived, want %d", what, p.n.Load(), want)
		}
	}
}

// sippRun is one SIPp run in the hq namespace.
type sippRun struct {
	name string
	out  bytes.Buffer // SIPp's output; read after done
	done chan error
}

// startSIPp runs SIPp in ns hq as a UAC of scenario against the agent's
// SIP socket, on local port port, with inf as its injection file
// (SEQUENTIAL).
func startSIPp(t *testing.T, tp *netnstest.Topology, sipp, scenario string, port int, remote netip.AddrPort, inf string, extra ...string) *sippRun {
	t.Helper()
	sf, err := filepath.Abs(filepath.Join("testdata", "sipp", scenario))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	csv := filepath.Join(dir, "inf.csv")
	if err := os.WriteFile(csv, []byte("SEQUENTIAL\n"+inf), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{sipp, remote.String(), "-sf", sf, "-inf", csv, "-i", "198.18.0.2", "-p", strconv.Itoa(port),
		"-nostdin", "-timeout", "60", "-timeout_error", "-trace_err", "-error_file", filepath.Join(dir, "errors.log")}, extra...)
	s := &sippRun{name: scenario, done: make(chan error, 1)}
	cmd := tp.Command("hq", args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &s.out, &s.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case err := <-s.done:
			s.done <- err
		default:
			_ = cmd.Process.Kill()
			s.done <- <-s.done
		}
		if t.Failed() {
			errs, _ := os.ReadFile(filepath.Join(dir, "errors.log"))
			t.Logf("SIPp %s: %s\n%s", scenario, lastBytes(s.out.String(), 3000), lastBytes(string(errs), 3000))
		}
	})
	return s
}

// wait waits for SIPp to exit and fails unless every call succeeded.
func (s *sippRun) wait(t *testing.T) {
	t.Helper()
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup, which logs the output on failure
		if err != nil {
			t.Fatalf("SIPp %s: %v", s.name, err)
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("SIPp %s did not finish", s.name)
	}
}

func lastBytes(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// sendINFO is the test's hang-up button: an in-dialog INFO to SIPp for
// connection c, after which the scenario sends BYE. SIPp matches it by
// Call-ID; From carries the box's tag, as the box would write it.
func sendINFO(t *testing.T, hq netns.NsHandle, port int, c MediaConnection) {
	t.Helper()
	u, err := nsSockets{hq}.ListenPacket(context.Background(), "udp4", "198.18.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	local, _, _ := strings.Cut(c.ID, ":")
	msg := fmt.Sprintf("INFO sip:ecss@198.18.0.2:%d SIP/2.0\r\nVia: SIP/2.0/UDP %s;branch=z9hG4bK%s\r\n"+
		"From: <sip:msr@198.18.0.1>;tag=%s\r\nTo: <sip:ecss@198.18.0.2>\r\nCall-ID: %s\r\nCSeq: 2 INFO\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n",
		port, u.LocalAddr(), randHex(6), local, c.CallID)
	if _, err := u.WriteTo([]byte(msg), &net.UDPAddr{IP: net.IPv4(198, 18, 0, 2), Port: port}); err != nil {
		t.Fatal(err)
	}
}

// cfwConn is the test's control-channel client: requests written out as
// RFC 6230 §9 frames, answers read with net/textproto.
type cfwConn struct {
	t *testing.T
	c net.Conn
	r *textproto.Reader
	n int
}

func dialCFW(t *testing.T, ns netns.NsHandle, to netip.AddrPort) *cfwConn {
	t.Helper()
	var c net.Conn
	err := inNS(ns, func() error {
		var err error
		c, err = net.DialTimeout("tcp", to.String(), 5*time.Second)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	return &cfwConn{t: t, c: c, r: textproto.NewReader(bufio.NewReader(c))}
}

// request sends one request (headers: "Name: value\r\n" lines) and returns
// the answer's status, headers and body.
func (c *cfwConn) request(method, headers, body string) (int, textproto.MIMEHeader, string) {
	c.t.Helper()
	c.n++
	id := fmt.Sprintf("tx%06d", c.n)
	msg := "CFW " + id + " " + method + "\r\n" + headers
	if body != "" {
		msg += fmt.Sprintf("Content-Length: %d\r\n", len(body))
	}
	if _, err := io.WriteString(c.c, msg+"\r\n"+body); err != nil {
		c.t.Fatal(err)
	}
	line, err := c.r.ReadLine()
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "CFW" || f[1] != id {
		c.t.Fatalf("%s: answer %q", method, line)
	}
	status, err := strconv.Atoi(f[2])
	if err != nil {
		c.t.Fatalf("%s: answer %q", method, line)
	}
	h, err := c.r.ReadMIMEHeader()
	if err != nil {
		c.t.Fatalf("%s: headers: %v", method, err)
	}
	var b []byte
	if n, _ := strconv.Atoi(h.Get("Content-Length")); n > 0 {
		b = make([]byte, n)
		if _, err := io.ReadFull(c.r.R, b); err != nil {
			c.t.Fatalf("%s: body: %v", method, err)
		}
	}
	return status, h, string(b)
}
