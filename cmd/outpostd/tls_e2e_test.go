package main

import (
	"bufio"
	"crypto/md5"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outpost/outpost/gateway/siptest"
)

// TestPhonesOverTLS: two phones behind a "NAT" (their Via and Contact
// name a private address nobody listens on) register over TLS with
// digest, verifying the box's certificate against the CA the test
// configured (sip.tls); one calls the other with sips: URIs and the
// INVITE reaches the callee over the connection it registered on (RFC
// 5626 flow reuse); CRLF keep-alives are answered; TLS below 1.2 is
// refused; status shows the certificate's fingerprint.
func TestPhonesOverTLS(t *testing.T) {
	caPEM, certPEM, keyPEM, leafDER := testCA(t)
	doc := benchDoc(2, []string{"udp:127.0.0.1:0", "tls:127.0.0.1:0"}, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^user\d{4}$`, "route": "local"}}
		m["sip"].(map[string]any)["tls"] = map[string]any{"cert_pem": certPEM, "key_pem": keyPEM}
	})
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	addr := d.listener("tls")

	st := d.status()
	sum := sha256.Sum256(leafDER)
	if st.SIPTLS == nil || st.SIPTLS.Source != "document" || strings.ReplaceAll(st.SIPTLS.SHA256, ":", "") != strings.ToUpper(hex.EncodeToString(sum[:])) {
		t.Fatalf("status sip_tls = %+v, want the document's certificate %X", st.SIPTLS, sum)
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM([]byte(caPEM))
	// TLS 1.1 is refused.
	if c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}); err == nil {
		c.Close()
		t.Fatal("a TLS 1.1 handshake succeeded")
	}

	callee := dialPhone(t, addr, roots, "user0001", "10.255.0.11")
	caller := dialPhone(t, addr, roots, "user0000", "10.255.0.10")
	callee.register(t, "pw0001")
	caller.register(t, "pw0000")

	step(t, "keep-alive", func() {
		callee.conn.Write([]byte("\r\n\r\n"))
		callee.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, 2)
		if _, err := io.ReadFull(callee.r, b); err != nil || string(b) != "\r\n" {
			t.Fatalf("CRLF ping: pong %q, %v", b, err)
		}
	})

	step(t, "call", func() {
		sdp := "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 40000 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n"
		inv := caller.request("INVITE", "sips:user0001@bench.local", "user0001", 1, "application/sdp", sdp)
		res := caller.send(t, inv)
		for res.code == 100 {
			res = caller.read(t)
		}
		if res.code == 407 || res.code == 401 {
			caller.ack4xx(t, inv, res)
			inv = caller.request("INVITE", "sips:user0001@bench.local", "user0001", 2, "application/sdp", sdp)
			inv.hdr = append(inv.hdr, caller.authorization(t, res, "INVITE", "sips:user0001@bench.local", "pw0000"))
			res = caller.send(t, inv)
		}
		// The callee gets the INVITE on the connection it registered on.
		in := callee.read(t)
		if in.method != "INVITE" {
			t.Fatalf("callee got %q, want INVITE", in.first)
		}
		if !strings.HasPrefix(in.uri, "sips:user0001@10.255.0.11") {
			t.Errorf("B leg Request-URI %q, want the registered sips: contact", in.uri)
		}
		if c := in.get("Contact"); !strings.Contains(c, "sips:") && !strings.Contains(c, "transport=tls") {
			t.Errorf("B leg Contact %q does not name the TLS listener", c)
		}
		callee.reply(t, in, 180, "Ringing", "", "")
		answer := strings.ReplaceAll(sdp, "40000", "40002")
		callee.reply(t, in, 200, "OK", "application/sdp", answer)
		for res.code < 200 {
			res = caller.read(t)
		}
		if res.code != 200 {
			t.Fatalf("caller got %d %s", res.code, res.first)
		}
		ack := caller.inDialog("ACK", res, 2)
		caller.write(t, ack)
		if a := callee.read(t); a.method != "ACK" {
			t.Fatalf("callee got %q, want ACK", a.first)
		}
		bye := caller.inDialog("BYE", res, 3)
		caller.write(t, bye)
		b := callee.read(t)
		if b.method != "BYE" {
			t.Fatalf("callee got %q, want BYE", b.first)
		}
		callee.reply(t, b, 200, "OK", "", "")
		if r := caller.read(t); r.code != 200 {
			t.Fatalf("BYE answered %q", r.first)
		}
	})
	d.stop()
}

// testCA makes a CA and a certificate it signs for 127.0.0.1: the CA's
// PEM, the leaf's PEM and key PEM, and the leaf's DER.
func testCA(t *testing.T) (caPEM, certPEM, keyPEM string, leafDER []byte) {
	t.Helper()
	return testCAWith(t, func(*x509.Certificate) {})
}

// testCAWith is testCA with the leaf's template adjusted by leaf.
func testCAWith(t *testing.T, adjust func(leaf *x509.Certificate)) (caPEM, certPEM, keyPEM string, leafDER []byte) {
	t.Helper()
	ca := siptest.NewCA(t)
	certPEM, keyPEM = ca.IssueWith(t, "box", x509.ExtKeyUsageServerAuth, func(leaf *x509.Certificate) {
		leaf.IPAddresses, leaf.DNSNames = []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"bench.local"}
		adjust(leaf)
	})
	block, _ := pem.Decode([]byte(certPEM))
	return ca.PEM, certPEM, keyPEM, block.Bytes
}

// tlsPhone is a phone with hand-written SIP over one TLS connection; its
// Via and Contact name a private address (it is "behind a NAT").
type tlsPhone struct {
	conn    *tls.Conn
	r       *bufio.Reader
	user    string
	private string
	callID  string
	tag     string
	n       int
}

func dialPhone(t *testing.T, addr string, roots *x509.CertPool, user, private string) *tlsPhone {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("%s: TLS to the box: %v", user, err)
	}
	t.Cleanup(func() { c.Close() })
	return &tlsPhone{conn: c, r: bufio.NewReader(c), user: user, private: private, callID: user + "-" + strconv.FormatInt(time.Now().UnixNano(), 36), tag: "t" + user}
}

type sipMsg struct {
	first, method, uri string
	code               int
	hdr                []string // "Name: value"
	body               string
}

func (m *sipMsg) get(name string) string {
	for _, h := range m.hdr {
		if n, v, ok := strings.Cut(h, ":"); ok && strings.EqualFold(strings.TrimSpace(n), name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func (m *sipMsg) all(name string) []string {
	var out []string
	for _, h := range m.hdr {
		if n, v, ok := strings.Cut(h, ":"); ok && strings.EqualFold(strings.TrimSpace(n), name) {
			out = append(out, strings.TrimSpace(v))
		}
	}
	return out
}

func (m *sipMsg) String() string {
	var b strings.Builder
	b.WriteString(m.first + "\r\n")
	for _, h := range m.hdr {
		if !strings.HasPrefix(strings.ToLower(h), "content-length:") {
			b.WriteString(h + "\r\n")
		}
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", len(m.body), m.body)
	return b.String()
}

func (p *tlsPhone) request(method, uri, toUser string, cseq int, ctype, body string) *sipMsg {
	p.n++
	m := &sipMsg{first: method + " " + uri + " SIP/2.0", method: method, uri: uri, body: body, hdr: []string{
		fmt.Sprintf("Via: SIP/2.0/TLS %s:5061;branch=z9hG4bK%s%d;rport", p.private, p.tag, p.n),
		"Max-Forwards: 70",
		fmt.Sprintf("From: <sips:%s@bench.local>;tag=%s", p.user, p.tag),
		fmt.Sprintf("To: <sips:%s@bench.local>", toUser),
		fmt.Sprintf("Call-ID: %s-%s", p.callID, method),
		fmt.Sprintf("CSeq: %d %s", cseq, method),
		fmt.Sprintf("Contact: <sips:%s@%s:5061>", p.user, p.private),
	}}
	if ctype != "" {
		m.hdr = append(m.hdr, "Content-Type: "+ctype)
	}
	return m
}

func (p *tlsPhone) write(t *testing.T, m *sipMsg) {
	t.Helper()
	if _, err := p.conn.Write([]byte(m.String())); err != nil {
		t.Fatalf("%s: write: %v", p.user, err)
	}
}

func (p *tlsPhone) send(t *testing.T, m *sipMsg) *sipMsg {
	t.Helper()
	p.write(t, m)
	return p.read(t)
}

// read reads the next message on the connection.
func (p *tlsPhone) read(t *testing.T) *sipMsg {
	t.Helper()
	p.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	m, err := readSIP(p.r)
	if err != nil {
		t.Fatalf("%s: read: %v", p.user, err)
	}
	return m
}

// readSIP reads one message from r (CRLFs before it are skipped).
func readSIP(r *bufio.Reader) (*sipMsg, error) {
	tp := textproto.NewReader(r)
	var first string
	for first == "" { // CRLFs between messages
		l, err := tp.ReadLine()
		if err != nil {
			return nil, err
		}
		first = l
	}
	m := &sipMsg{first: first}
	f := strings.SplitN(first, " ", 3)
	if strings.HasPrefix(first, "SIP/2.0 ") {
		m.code, _ = strconv.Atoi(f[1])
	} else if len(f) == 3 {
		m.method, m.uri = f[0], f[1]
	}
	n := 0
	for {
		l, err := tp.ReadLine()
		if err != nil {
			return nil, err
		}
		if l == "" {
			break
		}
		m.hdr = append(m.hdr, l)
	}
	if v := m.get("Content-Length"); v != "" {
		n, _ = strconv.Atoi(v)
	} else if v := m.get("l"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	m.body = string(b)
	return m, nil
}

var digestParam = regexp.MustCompile(`(\w+)=("[^"]*"|[^,\s]*)`)

// authorization answers the MD5 challenge of res.
func (p *tlsPhone) authorization(t *testing.T, res *sipMsg, method, uri, password string) string {
	t.Helper()
	name, hdr := "Authorization", "WWW-Authenticate"
	if res.code == 407 {
		name, hdr = "Proxy-Authorization", "Proxy-Authenticate"
	}
	for _, ch := range res.all(hdr) {
		ps := map[string]string{}
		for _, kv := range digestParam.FindAllStringSubmatch(ch, -1) {
			ps[strings.ToLower(kv[1])] = strings.Trim(kv[2], `"`)
		}
		if a := ps["algorithm"]; a != "" && !strings.EqualFold(a, "MD5") {
			continue
		}
		h := func(s string) string { x := md5.Sum([]byte(s)); return hex.EncodeToString(x[:]) }
		ha1 := h(p.user + ":" + ps["realm"] + ":" + password)
		ha2 := h(method + ":" + uri)
		if strings.Contains(ps["qop"], "auth") {
			resp := h(ha1 + ":" + ps["nonce"] + ":00000001:c0ffee:auth:" + ha2)
			return fmt.Sprintf(`%s: Digest username="%s", realm="%s", nonce="%s", uri="%s", response="%s", algorithm=MD5, qop=auth, nc=00000001, cnonce="c0ffee"`,
				name, p.user, ps["realm"], ps["nonce"], uri, resp)
		}
		return fmt.Sprintf(`%s: Digest username="%s", realm="%s", nonce="%s", uri="%s", response="%s", algorithm=MD5`,
			name, p.user, ps["realm"], ps["nonce"], uri, h(ha1+":"+ps["nonce"]+":"+ha2))
	}
	t.Fatalf("%s: no MD5 challenge in %q", p.user, res.String())
	return ""
}

func (p *tlsPhone) register(t *testing.T, password string) {
	t.Helper()
	const uri = "sips:bench.local"
	reg := p.request("REGISTER", uri, p.user, 1, "", "")
	reg.hdr = append(reg.hdr, "Expires: 300")
	res := p.send(t, reg)
	if res.code != 401 {
		t.Fatalf("%s: REGISTER answered %q, want 401", p.user, res.first)
	}
	reg = p.request("REGISTER", uri, p.user, 2, "", "")
	reg.hdr = append(reg.hdr, "Expires: 300", p.authorization(t, res, "REGISTER", uri, password))
	if res = p.send(t, reg); res.code != 200 {
		t.Fatalf("%s: authenticated REGISTER answered %q", p.user, res.first)
	}
}

// ack4xx acknowledges a non-2xx final response to inv (same branch).
func (p *tlsPhone) ack4xx(t *testing.T, inv, res *sipMsg) {
	t.Helper()
	ack := &sipMsg{first: "ACK " + inv.uri + " SIP/2.0", hdr: []string{inv.get("Via"), "Max-Forwards: 70", "From: " + inv.get("From"),
		"To: " + res.get("To"), "Call-ID: " + inv.get("Call-ID"), "CSeq: " + strings.Fields(inv.get("CSeq"))[0] + " ACK"}}
	ack.hdr[0] = "Via: " + ack.hdr[0]
	p.write(t, ack)
}

// inDialog builds a request in the dialog a 2xx set up.
func (p *tlsPhone) inDialog(method string, res *sipMsg, cseq int) *sipMsg {
	target := strings.Trim(strings.SplitN(res.get("Contact"), ";", 2)[0], "<>")
	if i := strings.Index(res.get("Contact"), ">"); i > 0 {
		target = strings.TrimPrefix(res.get("Contact")[:i], "<")
	}
	p.n++
	return &sipMsg{first: method + " " + target + " SIP/2.0", hdr: []string{
		fmt.Sprintf("Via: SIP/2.0/TLS %s:5061;branch=z9hG4bK%s%d;rport", p.private, p.tag, p.n),
		"Max-Forwards: 70", "From: " + res.get("From"), "To: " + res.get("To"), "Call-ID: " + res.get("Call-ID"),
		fmt.Sprintf("CSeq: %d %s", cseq, method)}}
}

// reply answers req.
func (p *tlsPhone) reply(t *testing.T, req *sipMsg, code int, reason, ctype, body string) {
	t.Helper()
	m := &sipMsg{first: fmt.Sprintf("SIP/2.0 %d %s", code, reason), body: body}
	for _, v := range req.all("Via") {
		m.hdr = append(m.hdr, "Via: "+v)
	}
	to := req.get("To")
	if !strings.Contains(to, "tag=") {
		to += ";tag=callee1"
	}
	m.hdr = append(m.hdr, "From: "+req.get("From"), "To: "+to, "Call-ID: "+req.get("Call-ID"), "CSeq: "+req.get("CSeq"),
		fmt.Sprintf("Contact: <sips:%s@%s:5061>", p.user, p.private))
	if ctype != "" {
		m.hdr = append(m.hdr, "Content-Type: "+ctype)
	}
	p.write(t, m)
}
