package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	icdigest "github.com/icholy/digest"

	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/gateway/digest"
	"github.com/outpost/outpost/gateway/registrar"
)

// readSIP reads one SIP message from a stream (headers, then
// Content-Length bytes), skipping CRLF keep-alives.
func readSIP(t *testing.T, c net.Conn, r *bufio.Reader) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	n := 0
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read: %v (so far %q)", err, b.String())
		}
		if b.Len() == 0 && strings.TrimSpace(line) == "" {
			continue
		}
		b.WriteString(line)
		if line == "\r\n" {
			break
		}
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "Content-Length") {
			n, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatal(err)
	}
	return b.String() + string(body)
}

func listenerOf(t *testing.T, s *Server, transport string) string {
	t.Helper()
	for _, l := range s.Listeners() {
		if strings.HasPrefix(l, transport+":") {
			return strings.TrimPrefix(l, transport+":")
		}
	}
	t.Fatalf("no %s listener in %v", transport, s.Listeners())
	return ""
}

func answer(t *testing.T, challenge, method, uri, user, pw string) string {
	t.Helper()
	ch, err := icdigest.ParseChallenge(challenge)
	if err != nil {
		t.Fatalf("challenge %q: %v", challenge, err)
	}
	cr, err := icdigest.Digest(ch, icdigest.Options{Method: method, URI: uri, Username: user, Password: pw, Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	return cr.String()
}

// TestOutboundFlow: RFC 5626 on the registrar — a phone registering over
// TCP with Supported: outbound, reg-id and +sip.instance gets a 200 with
// Require: outbound and Flow-Timer (without Supported: outbound it gets
// neither, and two reg-id Contacts are a 400); once that connection is
// gone, a call to the phone is answered 430 Flow Failed (§5.3) and no
// new connection is opened toward it.
func TestOutboundFlow(t *testing.T) {
	cfg := testConfig(Listen{Transport: "udp", Addr: "127.0.0.1:0"}, Listen{Transport: "tcp", Addr: "127.0.0.1:0"})
	cfg.Registrar.Users = append(cfg.Registrar.Users, registrar.User{Extension: "1002",
		HA1MD5: digest.HA1(digest.MD5, "1002", realm, "pw2"), HA1SHA256: digest.HA1(digest.SHA256, "1002", realm, "pw2")})
	cfg.Dialplan = dialplan.Config{Rules: []dialplan.Rule{{Name: "local", Match: `^1\d{3}$`, Route: dialplan.RouteLocal}}}
	s := startServer(t, cfg)
	tcpAddr := listenerOf(t, s, "tcp")

	// The phone's side: a listener for what the box might open toward it
	// (it must not), and its registration connection.
	back, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	opened := make(chan struct{}, 1)
	go func() {
		if c, err := back.Accept(); err == nil {
			opened <- struct{}{}
			c.Close()
		}
	}()
	conn, err := net.Dial("tcp", tcpAddr)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	local := conn.LocalAddr().String()
	cseq := 0
	register := func(authz, supported string, contacts ...string) string {
		cseq++
		m := fmt.Sprintf("REGISTER sip:%s SIP/2.0\r\nVia: SIP/2.0/TCP %s;branch=z9hG4bK-ob%d\r\nMax-Forwards: 70\r\n"+
			"From: <sip:1001@%s>;tag=ob1\r\nTo: <sip:1001@%s>\r\nCall-ID: ob-call\r\nCSeq: %d REGISTER\r\nExpires: 600\r\n",
			realm, local, cseq, realm, realm, cseq)
		for _, c := range contacts {
			m += "Contact: " + c + "\r\n"
		}
		if supported != "" {
			m += "Supported: " + supported + "\r\n"
		}
		if authz != "" {
			m += "Authorization: " + authz + "\r\n"
		}
		if _, err := conn.Write([]byte(m + "Content-Length: 0\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		return readSIP(t, conn, r)
	}
	backAddr := back.Addr().String()
	ct := fmt.Sprintf(`<sip:1001@%s;transport=tcp>;reg-id=1;+sip.instance="<urn:uuid:00000000-0000-0000-0000-00000000a001>"`, backAddr)
	ct2 := fmt.Sprintf(`<sip:1001@%s;transport=tcp>;reg-id=2;+sip.instance="<urn:uuid:00000000-0000-0000-0000-00000000a001>"`, backAddr)
	res := register("", "outbound", ct)
	if !strings.HasPrefix(res, "SIP/2.0 401") {
		t.Fatalf("first REGISTER: %q", res)
	}
	authz := func(res string) string {
		return answer(t, header(res, "WWW-Authenticate"), "REGISTER", "sip:"+realm, "1001", "pw")
	}
	if res2 := register(authz(res), "outbound", ct, ct2); !strings.HasPrefix(res2, "SIP/2.0 400") {
		t.Errorf("two reg-id Contacts: %q, want 400", strings.SplitN(res2, "\r\n", 2)[0])
	}
	res = register("", "", ct)
	res = register(authz(res), "", ct)
	if !strings.HasPrefix(res, "SIP/2.0 200") || header(res, "Require") != "" || header(res, "Flow-Timer") != "" {
		t.Errorf("without Supported: outbound: %q, want 200 without Require and Flow-Timer", res)
	}
	res = register("", "path, outbound", ct)
	res = register(authz(res), "path, outbound", ct)
	if !strings.HasPrefix(res, "SIP/2.0 200") || header(res, "Require") != "outbound" || header(res, "Flow-Timer") != "120" {
		t.Fatalf("outbound REGISTER: %q, want 200 with Require: outbound, Flow-Timer: 120", res)
	}
	loc := locator{reg: s.Registrar(), flow: s.flowOpen}
	if cs := loc.Contacts("1001"); len(cs) != 1 || cs[0].FlowFailed {
		t.Fatalf("contacts with the flow open: %+v", cs)
	}

	conn.Close()
	// The box learns of the closed connection from its reader; no event
	// reaches the test, so poll (bounded).
	for deadline := time.Now().Add(5 * time.Second); ; {
		if cs := loc.Contacts("1001"); len(cs) == 1 && cs[0].FlowFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("flow still open after the connection closed: %+v", loc.Contacts("1001"))
		}
		time.Sleep(10 * time.Millisecond)
	}

	// 1002 calls 1001 over UDP.
	p := newPhone(t, "udp:"+listenerOf(t, s, "udp"))
	port := p.conn.LocalAddr().(*net.UDPAddr).Port
	uri := "sip:1001@" + realm
	invite := func(n int, authz string) string {
		m := fmt.Sprintf("INVITE %s SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:%d;branch=z9hG4bK-inv%d;rport\r\nMax-Forwards: 70\r\n"+
			"From: <sip:1002@%s>;tag=c1\r\nTo: <sip:1001@%s>\r\nCall-ID: ob-invite\r\nCSeq: %d INVITE\r\n"+
			"Contact: <sip:1002@127.0.0.1:%d>\r\n", uri, port, n, realm, realm, n, port)
		if authz != "" {
			m += "Proxy-Authorization: " + authz + "\r\n"
		}
		return m + "Content-Length: 0\r\n\r\n"
	}
	p.send(invite(1, ""))
	ch := p.read()
	if !strings.HasPrefix(ch, "SIP/2.0 407") {
		t.Fatalf("INVITE: %q, want 407", ch)
	}
	p.send(invite(2, answer(t, header(ch, "Proxy-Authenticate"), "INVITE", uri, "1002", "pw2")))
	final := ""
	for final == "" {
		if m := p.read(); !strings.HasPrefix(m, "SIP/2.0 1") {
			final = m
		}
	}
	if !strings.HasPrefix(final, "SIP/2.0 430") {
		t.Errorf("call to a contact whose flow is gone: %q, want 430 Flow Failed", strings.SplitN(final, "\r\n", 2)[0])
	}
	to := header(final, "To")
	p.send(fmt.Sprintf("ACK %s SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:%d;branch=z9hG4bK-inv2;rport\r\nMax-Forwards: 70\r\n"+
		"From: <sip:1002@%s>;tag=c1\r\nTo: %s\r\nCall-ID: ob-invite\r\nCSeq: 2 ACK\r\nContent-Length: 0\r\n\r\n", uri, port, realm, to))
	select {
	case <-opened:
		t.Error("the box opened a new connection to an outbound contact")
	default:
	}
}
