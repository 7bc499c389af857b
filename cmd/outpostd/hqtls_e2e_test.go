package main

import (
	"bufio"
	"bytes"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/gateway/siptest"
	"github.com/outpost/outpost/internal/testenv"
	"github.com/outpost/outpost/netcfg/netnstest"
)

// Addresses inside the test's own network namespace (its loopback only):
// the box listens on 127.0.0.1 (ephemeral ports), Kamailio as HQ on
// 127.0.0.2 and the UA behind HQ on 127.0.0.3.
const (
	kamIP     = "127.0.0.2"
	kamTLS    = kamIP + ":5061"
	kamUDP    = kamIP + ":5060"
	hqUAAddr  = "127.0.0.3:5060"
	hqDomain  = "hq.test"
	trunkUser = "branch1"
	trunkPass = "trunk-secret"
)

// TestHQOverTLSWithKamailio: Debian's Kamailio with its TLS module is HQ
// (hq.domain hq.test, a static tls target as the next hop, mutual TLS:
// Kamailio requires and verifies the box's client certificate; the box
// verifies Kamailio's against hq.ca_pem and the name hq.test). It checks
// that the OPTIONS probes are answered over TLS (target up) with the
// domain in the Request-URI, and that the box sends SNI (Kamailio's
// default certificate names another host: only SNI hq.test gets the
// right one); that a phone's binding is registered
// upstream over TLS with digest (REGISTER sip:hq.test); that a call from
// a branch phone (over TLS to the box) reaches a UA behind Kamailio with
// Request-URI sip:3001@hq.test and that the box's ACK and BYE follow
// Kamailio's Record-Route; that HQ's 302 to a sips: Contact of a second
// pool (another TLS listener, its host resolved with hq.dns_servers) is
// followed over TLS verified for that host, and refused when the pool's
// certificate does not name it; that a call from the UA behind HQ reaches the
// phone through Kamailio, which opens TLS to the box and is trusted as HQ
// (no challenge), with ACK and BYE routed back the same way; and that a
// box whose hq.ca_pem did not sign Kamailio's certificate reports the
// target down with the verification error in status.
func TestHQOverTLSWithKamailio(t *testing.T) {
	kam := kamailioBinary(t)
	tp := netnstest.New(t)
	ns := nsRunner(t, tp.Handle("lab"))
	dir := t.TempDir()

	ca := siptest.NewCA(t)
	other := siptest.NewCA(t)
	hqCert, hqKey := ca.Issue(t, hqDomain, x509.ExtKeyUsageServerAuth)
	boxCert, boxKey := ca.IssueWith(t, "bench.local", x509.ExtKeyUsageServerAuth, func(c *x509.Certificate) {
		c.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	})
	clientCert, clientKey := ca.Issue(t, "branch1.bench.local", x509.ExtKeyUsageClientAuth)
	fallbackCert, fallbackKey := ca.Issue(t, "fallback.invalid", x509.ExtKeyUsageServerAuth)
	pool2Cert, pool2Key := ca.Issue(t, "pool2.hq.test", x509.ExtKeyUsageServerAuth)
	startKamailio(t, tp, kam, dir, map[string]string{"ca.pem": ca.PEM, "hq.pem": hqCert, "hq.key": hqKey,
		"default.pem": fallbackCert, "default.key": fallbackKey, "pool2.pem": pool2Cert, "pool2.key": pool2Key})
	var ua *udpUA
	var zone string
	ns(func() {
		ua = listenUA(t, hqUAAddr, kamUDP)
		zone = poolZone(t, kamIP, "pool2.hq.test.", "wrong.hq.test.")
	})

	doc := func(caPEM string) map[string]any {
		return benchDoc(2, []string{"udp:127.0.0.1:0", "tls:127.0.0.1:0"}, func(m map[string]any) {
			m["sip"].(map[string]any)["tls"] = map[string]any{"cert_pem": boxCert, "key_pem": boxKey}
			m["dialplan"] = []map[string]any{
				{"name": "local", "match": `^user\d{4}$`, "route": "local"},
				{"name": "hq", "match": `^[34]\d{3}$`, "route": "hq"},
			}
			m["hq"] = map[string]any{"domain": hqDomain, "targets": []string{"tls:" + kamTLS}, "transport": "tls",
				"ca_pem": caPEM, "client_cert_pem": clientCert, "client_key_pem": clientKey,
				"dns_servers": []string{zone}, "options_interval_ms": 200, "down_after": 1, "up_after": 1,
				"register_upstream": true, "auth_username": trunkUser, "auth_password": trunkPass}
		})
	}
	d := startDaemonIn(t, tp.NS("lab"), filepath.Join(dir, "box"), writeJSON(t, filepath.Join(dir, "box.json"), doc(ca.PEM)))
	target := "tls:" + kamTLS

	step(t, "probes over TLS", func() {
		st := d.waitFor("hq target probed up", 10*time.Second, func(s api.Status) bool {
			return len(s.HQ) == 1 && s.HQ[0].Up && s.HQ[0].ConsecutiveOK >= 2
		})
		if st.HQ[0].Target != target {
			t.Errorf("hq target %q, want %q", st.HQ[0].Target, target)
		}
		if !kamLogged("hq: OPTIONS via tls from 127.0.0.1 ruri sip:" + hqDomain) {
			t.Fatalf("Kamailio saw no OPTIONS for sip:%s over TLS:\n%s", hqDomain, tail(kamLog.String(), 4096))
		}
	})

	var phone *tlsPhone
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM([]byte(ca.PEM))
	ns(func() { phone = dialPhone(t, d.listener("tls"), roots, "user0001", "10.255.0.11") })
	phone.register(t, "pw0001")

	step(t, "upstream REGISTER with digest over TLS", func() {
		d.waitFor("upstream registered", 10*time.Second, func(s api.Status) bool { return s.Upstream["registered"] == 1 })
		registered := kamLogged("hq: REGISTER sip:user0001@bench.local via tls from 127.0.0.1 ruri sip:" + hqDomain)
		log := kamLog.String()
		if !registered {
			t.Fatalf("Kamailio saw no authenticated REGISTER sip:%s over TLS:\n%s", hqDomain, tail(log, 4096))
		}
		if !strings.Contains(log, ";transport=tls") {
			t.Errorf("the upstream Contact does not name the box's TLS listener:\n%s", tail(log, 4096))
		}
	})

	sdp := "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 40000 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n"
	// inviteHQ sends the phone's INVITE for dial, answers the box's
	// challenge, and returns the INVITE it sent with credentials (cseq+1).
	inviteHQ := func(dial string, cseq int) *sipMsg {
		uri := "sips:" + dial + "@bench.local"
		inv := phone.request("INVITE", uri, dial, cseq, "application/sdp", sdp)
		res := phone.send(t, inv)
		for res.code == 100 {
			res = phone.read(t)
		}
		if res.code != 407 && res.code != 401 {
			t.Fatalf("phone's INVITE answered %q, want a challenge", res.first)
		}
		phone.ack4xx(t, inv, res)
		inv = phone.request("INVITE", uri, dial, cseq+1, "application/sdp", sdp)
		inv.hdr = append(inv.hdr, phone.authorization(t, res, "INVITE", uri, "pw0001"))
		phone.write(t, inv)
		return inv
	}
	// answerAndHangUp: the UA behind HQ answers in; the phone (whose
	// INVITE had CSeq cseq) ACKs and hangs up, both through Kamailio.
	answerAndHangUp := func(in *sipMsg, cseq int) {
		if rr := in.all("Record-Route"); len(rr) == 0 {
			t.Fatalf("Kamailio did not record-route: %s", in)
		}
		ua.reply(t, in, 180, "Ringing", "")
		ua.reply(t, in, 200, "OK", strings.ReplaceAll(sdp, "40000", "40010"))
		res := phone.read(t)
		for ; res.code < 200; res = phone.read(t) {
		}
		if res.code != 200 {
			t.Fatalf("phone got %q, want 200", res.first)
		}
		phone.write(t, phone.inDialog("ACK", res, cseq))
		ack := ua.expect(t, "ACK")
		kamailioHop(t, ack)
		phone.write(t, phone.inDialog("BYE", res, cseq+1))
		bye := ua.expect(t, "BYE")
		kamailioHop(t, bye)
		ua.reply(t, bye, 200, "OK", "")
		if r := phone.read(t); r.code != 200 {
			t.Fatalf("phone's BYE answered %q", r.first)
		}
	}

	step(t, "branch to HQ", func() {
		inviteHQ("3001", 10)
		in := ua.expect(t, "INVITE")
		if in.uri != "sip:3001@"+hqDomain {
			t.Errorf("HQ got Request-URI %q, want sip:3001@%s (the target is only the next hop)", in.uri, hqDomain)
		}
		answerAndHangUp(in, 11)
	})

	step(t, "HQ redirects to a TLS pool", func() {
		// wrong.hq.test resolves to the pool, whose certificate names
		// pool2.hq.test only: the box refuses the connection, and the
		// caller gets a failure instead of a call to an unverified peer.
		inv := inviteHQ("4002", 20)
		res := phone.read(t)
		for ; res.code < 200; res = phone.read(t) {
		}
		if res.code < 400 {
			t.Fatalf("redirect to a host the certificate does not name answered %q, want a failure", res.first)
		}
		phone.ack4xx(t, inv, res)
		if strings.Contains(kamLog.String(), "INVITE sips:3001@wrong.hq.test") {
			t.Errorf("the box called a pool whose certificate does not name it:\n%s", tail(kamLog.String(), 4096))
		}
		// pool2.hq.test: resolved with hq.dns_servers, verified for that
		// name (SNI), called over TLS with the Contact as Request-URI.
		inviteHQ("4001", 30)
		in := ua.expect(t, "INVITE")
		if in.uri != "sips:3001@pool2.hq.test:5062" {
			t.Errorf("the pool got Request-URI %q, want the 302's Contact", in.uri)
		}
		if !kamLogged("hq: INVITE sips:3001@pool2.hq.test:5062 via tls from 127.0.0.1") {
			t.Errorf("Kamailio's second pool saw no INVITE over TLS:\n%s", tail(kamLog.String(), 4096))
		}
		answerAndHangUp(in, 31)
	})

	step(t, "HQ to branch", func() {
		inv := ua.request("INVITE", "sip:user0001@"+hqDomain, "user0001", 1, sdp, nil)
		ua.write(t, inv)
		in := phone.read(t)
		for in.method == "" { // a stray answer
			in = phone.read(t)
		}
		if in.method != "INVITE" {
			t.Fatalf("phone got %q, want INVITE (HQ's call not admitted as from HQ?)", in.first)
		}
		phone.reply(t, in, 180, "Ringing", "", "")
		phone.reply(t, in, 200, "OK", "application/sdp", strings.ReplaceAll(sdp, "40000", "40020"))
		res := ua.expect(t, "200")
		rr := res.all("Record-Route")
		if len(rr) == 0 {
			t.Fatalf("the 200 carries no Record-Route: %s", res)
		}
		ack := ua.inDialog("ACK", res, 1)
		ua.write(t, ack)
		if a := phone.read(t); a.method != "ACK" {
			t.Fatalf("phone got %q, want ACK", a.first)
		}
		ua.write(t, ua.inDialog("BYE", res, 2))
		b := phone.read(t)
		if b.method != "BYE" {
			t.Fatalf("phone got %q, want BYE", b.first)
		}
		phone.reply(t, b, 200, "OK", "", "")
		ua.expect(t, "200")
		if !kamLogged("hq: in-dialog BYE via udp") {
			t.Errorf("HQ's BYE did not go through Kamailio:\n%s", tail(kamLog.String(), 4096))
		}
	})

	step(t, "one connection to HQ, reused", func() {
		// Probes, upstream REGISTERs and B legs all went over one TLS
		// connection from the box to Kamailio (sipgo's pool), kept open.
		out := tp.Exec("lab", "ss", "-Htn", "state", "established", "dst", kamTLS)
		if n := strings.Count(strings.TrimSpace(out), "\n") + 1; strings.TrimSpace(out) == "" || n != 1 {
			t.Errorf("%d connections from the box to HQ, want 1:\n%s", n, out)
		}
	})

	step(t, "wrong CA refused and reported", func() {
		w := startDaemonIn(t, tp.NS("lab"), filepath.Join(dir, "wrong"), writeJSON(t, filepath.Join(dir, "wrong.json"), doc(other.PEM)))
		st := w.waitFor("hq target down", 10*time.Second, func(s api.Status) bool { return len(s.HQ) == 1 && !s.HQ[0].Up })
		if e := st.HQ[0].LastError; !strings.Contains(e, "certificate signed by unknown authority") || !strings.Contains(e, hqDomain) {
			t.Errorf("last_error %q, want the verification failure for %s", e, hqDomain)
		}
		out, err := w.ctl("status")
		if err != nil || !strings.Contains(out, "certificate signed by unknown authority") {
			t.Errorf("outpostctl status does not show why (%v):\n%s", err, out)
		}
		w.stop()
	})
	d.stop()
}

// poolZone serves A records pointing names at ip (serveZone).
func poolZone(t *testing.T, ip string, names ...string) string {
	t.Helper()
	return serveZone(t, func(q dns.Question) []dns.RR {
		if q.Qtype != dns.TypeA || !slices.Contains(names, strings.ToLower(q.Name)) {
			return nil
		}
		return []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP(ip)}}
	})
}

// kamailioHop checks that an in-dialog request from the box reached the UA
// through Kamailio (its Via on top, the box's below): the box honoured the
// Record-Route.
func kamailioHop(t *testing.T, m *sipMsg) {
	t.Helper()
	vias := m.all("Via")
	if len(vias) < 2 || !strings.Contains(vias[0], kamIP) || !strings.Contains(strings.ToUpper(vias[1]), "TLS") {
		t.Errorf("%s did not come through Kamailio over TLS: Via %q", m.method, vias)
	}
}

// kamailioBinary is Kamailio with its TLS module (scripts/test-deps.sh
// installs them), or skips (fails in CI).
func kamailioBinary(t *testing.T) string {
	t.Helper()
	bin := testenv.NeedTool(t, "kamailio")
	testenv.NeedFile(t, "kamailio tls.so", "/usr/lib/*/kamailio/modules/tls.so", "/usr/lib/kamailio/modules/tls.so")
	return bin
}

var kamLog syncBuffer

// kamLogged waits (up to 5 s) for Kamailio's log to hold s: its log
// reaches kamLog through a pipe, after the message it logs has moved on.
func kamLogged(s string) bool {
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(kamLog.String(), s); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// startKamailio runs Kamailio in the namespace "lab" with the test's
// configuration (testdata/kamailio) and pems (file name → PEM: ca.pem,
// hq.pem/key for SNI hq.test, default.pem/key otherwise) until the test
// ends.
func startKamailio(t *testing.T, tp *netnstest.Topology, bin, dir string, pems map[string]string) {
	t.Helper()
	kdir := filepath.Join(dir, "kamailio")
	if err := os.MkdirAll(kdir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range pems {
		if err := os.WriteFile(filepath.Join(kdir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := strings.NewReplacer("@DIR@", kdir, "@IP@", kamIP, "@TLSPORT@", "5061", "@TLSPORT2@", "5062", "@UDPPORT@", "5060",
		"@UAS@", hqUAAddr, "@USERNAME@", trunkUser, "@PASSWORD@", trunkPass)
	for _, name := range []string{"hq-tls.cfg", "tls.cfg"} {
		b, err := os.ReadFile(filepath.Join("testdata", "kamailio", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(kdir, name), []byte(r.Replace(string(b))), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kamLog.Reset()
	cmd := tp.Command("lab", bin, "-DD", "-E", "-f", filepath.Join(kdir, "hq-tls.cfg"), "-Y", kdir, "-P", filepath.Join(kdir, "kamailio.pid"), "-m", "64", "-M", "8")
	cmd.Stdout, cmd.Stderr = &kamLog, &kamLog
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its children are stopped with it
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("kamailio log (last 16 KiB):\n%s", tail(kamLog.String(), 16384))
		}
	})
	// Kamailio says nothing when it is ready: poll its TLS port (in the
	// namespace), bounded.
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-done:
			t.Fatalf("kamailio exited at start: %v\n%s", waitErr, kamLog.String())
		default:
		}
		out, _ := tp.Command("lab", "ss", "-Hltn", "sport", "= :5061").Output()
		if bytes.Contains(out, []byte(kamIP)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kamailio not listening after 20 s:\n%s", kamLog.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// udpUA is a UA behind HQ, hand-written SIP over UDP, with Kamailio as
// its outbound proxy.
type udpUA struct {
	conn  net.PacketConn
	proxy net.Addr
	addr  string
	n     int
}

func listenUA(t *testing.T, addr, proxy string) *udpUA {
	t.Helper()
	c, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	pa, err := net.ResolveUDPAddr("udp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	return &udpUA{conn: c, proxy: pa, addr: addr}
}

func (u *udpUA) write(t *testing.T, m *sipMsg) {
	t.Helper()
	if _, err := u.conn.WriteTo([]byte(m.String()), u.proxy); err != nil {
		t.Fatal(err)
	}
}

// expect reads until a request of method (or a response whose code is
// method, "200") arrives, skipping 100 Trying and retransmissions of
// other messages.
func (u *udpUA) expect(t *testing.T, method string) *sipMsg {
	t.Helper()
	buf := make([]byte, 65536)
	deadline := time.Now().Add(10 * time.Second)
	var seen []string
	for {
		u.conn.SetReadDeadline(deadline)
		n, _, err := u.conn.ReadFrom(buf)
		if err != nil {
			t.Fatalf("UA behind HQ: no %s (saw %q): %v", method, seen, err)
		}
		m, err := readSIP(bufio.NewReader(bytes.NewReader(buf[:n])))
		if err != nil {
			t.Fatalf("UA behind HQ: bad message: %v\n%s", err, buf[:n])
		}
		if m.method == method || m.method == "" && fmt.Sprint(m.code) == method {
			return m
		}
		seen = append(seen, m.first)
	}
}

// reply answers req, copying Record-Route (RFC 3261 §12.1.1).
func (u *udpUA) reply(t *testing.T, req *sipMsg, code int, reason, sdp string) {
	t.Helper()
	m := &sipMsg{first: fmt.Sprintf("SIP/2.0 %d %s", code, reason), body: sdp}
	for _, v := range req.all("Via") {
		m.hdr = append(m.hdr, "Via: "+v)
	}
	for _, v := range req.all("Record-Route") {
		m.hdr = append(m.hdr, "Record-Route: "+v)
	}
	to := req.get("To")
	if !strings.Contains(to, "tag=") {
		to += ";tag=hq1"
	}
	m.hdr = append(m.hdr, "From: "+req.get("From"), "To: "+to, "Call-ID: "+req.get("Call-ID"), "CSeq: "+req.get("CSeq"),
		"Contact: <sip:3001@"+u.addr+">")
	if sdp != "" {
		m.hdr = append(m.hdr, "Content-Type: application/sdp")
	}
	u.write(t, m)
}

// request builds an out-of-dialog request from the UA.
func (u *udpUA) request(method, uri, toUser string, cseq int, sdp string, extra []string) *sipMsg {
	u.n++
	m := &sipMsg{first: method + " " + uri + " SIP/2.0", method: method, uri: uri, body: sdp, hdr: []string{
		fmt.Sprintf("Via: SIP/2.0/UDP %s;branch=z9hG4bKhqua%d;rport", u.addr, u.n),
		"Max-Forwards: 70",
		"From: <sip:3001@" + hqDomain + ">;tag=hqua",
		fmt.Sprintf("To: <sip:%s@%s>", toUser, hqDomain),
		"Call-ID: hq-ua-call",
		fmt.Sprintf("CSeq: %d %s", cseq, method),
		"Contact: <sip:3001@" + u.addr + ">",
	}}
	if sdp != "" {
		m.hdr = append(m.hdr, "Content-Type: application/sdp")
	}
	m.hdr = append(m.hdr, extra...)
	return m
}

// inDialog builds an ACK or BYE in the dialog res (a 2xx to our INVITE)
// set up: to the remote Contact, through the route set (the 2xx's
// Record-Route in reverse, RFC 3261 §12.1.2).
func (u *udpUA) inDialog(method string, res *sipMsg, cseq int) *sipMsg {
	contact := res.get("Contact")
	if i, j := strings.Index(contact, "<"), strings.Index(contact, ">"); i >= 0 && j > i {
		contact = contact[i+1 : j]
	}
	var routes []string
	for _, v := range res.all("Record-Route") {
		for _, r := range strings.Split(v, ",") {
			routes = append([]string{"Route: " + strings.TrimSpace(r)}, routes...)
		}
	}
	u.n++
	m := &sipMsg{first: method + " " + contact + " SIP/2.0", method: method, uri: contact, hdr: append([]string{
		fmt.Sprintf("Via: SIP/2.0/UDP %s;branch=z9hG4bKhqua%d;rport", u.addr, u.n),
		"Max-Forwards: 70", "From: " + res.get("From"), "To: " + res.get("To"), "Call-ID: " + res.get("Call-ID"),
		fmt.Sprintf("CSeq: %d %s", cseq, method)}, routes...)}
	return m
}
