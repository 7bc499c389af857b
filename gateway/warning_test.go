package gateway

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/mode"
	"github.com/outpost/outpost/siptarget"
)

func TestSurvivableWarningValue(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    mode.Mode
		cfg  Config
		want string
	}{
		{"normal", mode.Normal, Config{Warning: SurvivableWarning{Agent: "b1"}}, ""},
		{"standalone", mode.Standalone, Config{}, ""},
		{"default text", mode.Survivable, Config{Warning: SurvivableWarning{Agent: "b1"}}, `399 b1 "Survivable mode: limited service"`},
		{"own text escaped", mode.Survivable, Config{Warning: SurvivableWarning{Agent: "b1", Text: `say "hi" \o/`}}, `399 b1 "say \"hi\" \\o/"`},
		{"off", mode.Survivable, Config{Warning: SurvivableWarning{Agent: "b1", Off: true}}, ""},
		{"host of the first listener", mode.Survivable, Config{Listen: []Listen{{Transport: "udp", Addr: "198.18.0.1:5060"}}}, `399 198.18.0.1 "Survivable mode: limited service"`},
		{"ipv6 host", mode.Survivable, Config{Listen: []Listen{{Transport: "udp", Addr: "[2001:db8::1]:5060"}}}, `399 [2001:db8::1] "Survivable mode: limited service"`},
		{"wildcard listener", mode.Survivable, Config{Listen: []Listen{{Transport: "udp", Addr: "0.0.0.0:5060"}}}, `399 outpost "Survivable mode: limited service"`},
	} {
		if got := (&running{cfg: tc.cfg}).warning(tc.m); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// In survivable mode the box's answers to REGISTER (the UDP fast path's,
// cached ones included) and INVITE (the B2BUA's) carry the Warning; in
// normal mode they do not.
func TestSurvivableWarningOnRegisterAndInvite(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	cfg := testConfig(Listen{Transport: "udp", Addr: "127.0.0.1:0"})
	cfg.Mode = mode.Normal
	cfg.Warning = SurvivableWarning{Agent: "branch-1"}
	// The phone's socket is also a PSTN gateway: its INVITEs are trusted
	// and routed by DID, so no digest is needed for them.
	cfg.PSTN = []PSTNGateway{{Name: "gw", Target: siptarget.MustParse("udp:"+pc.LocalAddr().String(), siptarget.UDP)}}
	cfg.Dialplan = dialplan.Config{Inbound: []dialplan.Inbound{{Match: `^\+1555(\d{4})$`, To: "$1"}}, Extensions: []string{"1001", "1002"}}
	s := startServer(t, cfg)
	to, _ := net.ResolveUDPAddr("udp", strings.TrimPrefix(s.Listeners()[0], "udp:"))
	p := &phone{t: t, conn: pc, to: to}
	const want = `399 branch-1 "Survivable mode: limited service"`

	// REGISTER in normal mode: no Warning.
	first := p.register("z9hG4bK-w1", 1, "")
	p.send(first)
	challenge := p.read()
	if !strings.HasPrefix(challenge, "SIP/2.0 401") || header(challenge, "Warning") != "" {
		t.Fatalf("normal mode challenge:\n%s", challenge)
	}
	// INVITE in normal mode: the B2BUA's 480 (1002 is not registered) has none.
	if res := p.invite(1); !strings.HasPrefix(res, "SIP/2.0 480") || header(res, "Warning") != "" {
		t.Fatalf("normal mode INVITE answer:\n%s", res)
	}

	s.SetMode(mode.Survivable)
	// The retransmission of the REGISTER answered in normal mode is not
	// served the cached answer without the Warning.
	p.send(first)
	if again := p.read(); !strings.HasPrefix(again, "SIP/2.0 401") || header(again, "Warning") != want {
		t.Fatalf("retransmission after the mode change:\n%s", again)
	}
	p.send(p.register("z9hG4bK-w2", 2, authorization(t, challenge)))
	if ok := p.read(); !strings.HasPrefix(ok, "SIP/2.0 200") || header(ok, "Warning") != want {
		t.Fatalf("survivable mode REGISTER 200:\n%s", ok)
	}
	if res := p.invite(2); !strings.HasPrefix(res, "SIP/2.0 480") || header(res, "Warning") != want {
		t.Fatalf("survivable mode INVITE answer:\n%s", res)
	}

	s.SetMode(mode.Normal)
	if res := p.invite(3); !strings.HasPrefix(res, "SIP/2.0 480") || header(res, "Warning") != "" {
		t.Fatalf("INVITE answer back in normal mode:\n%s", res)
	}
}

// invite sends a new INVITE from the phone (a PSTN gateway) to the DID of
// 1002 and returns the final answer, ACKed.
func (p *phone) invite(n int) string {
	p.t.Helper()
	port := p.conn.LocalAddr().(*net.UDPAddr).Port
	branch := fmt.Sprintf("z9hG4bK-inv%d", n)
	head := fmt.Sprintf("Via: SIP/2.0/UDP 127.0.0.1:%d;branch=%s;rport\r\nFrom: <sip:+15550000@127.0.0.1>;tag=g%d\r\n", port, branch, n)
	callID := fmt.Sprintf("Call-ID: warn-%d\r\n", n)
	p.send("INVITE sip:+15551002@" + p.to.String() + " SIP/2.0\r\n" + head + "To: <sip:+15551002@" + p.to.String() + ">\r\n" + callID +
		"CSeq: 1 INVITE\r\nMax-Forwards: 70\r\nContact: <sip:gw@127.0.0.1:" + fmt.Sprint(port) + ">\r\nContent-Length: 0\r\n\r\n")
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		res := p.read()
		if strings.HasPrefix(res, "SIP/2.0 1") {
			continue
		}
		p.send("ACK sip:+15551002@" + p.to.String() + " SIP/2.0\r\n" + head + "To: " + header(res, "To") + "\r\n" + callID +
			"CSeq: 1 ACK\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n")
		return res
	}
	p.t.Fatal("no final answer to the INVITE")
	return ""
}
