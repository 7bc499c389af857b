package msr

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"
)

// cfwSDP is a softswitch's offer of a control channel (RFC 6230 §5).
func cfwSDP(proto, setup, id string, extra string) []byte {
	s := "v=0\r\no=hq 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n" +
		"m=application 9 " + proto + " cfw\r\n"
	if setup != "" {
		s += "a=setup:" + setup + "\r\n"
	}
	s += "a=connection:new\r\n"
	if id != "" {
		s += "a=cfw-id:" + id + "\r\n"
	}
	return []byte(s + extra)
}

// The control channel set up as RFC 6230 §5 says: an INVITE offering a
// cfw m-line is answered with the control listener and the same cfw-id;
// the SYNC naming it binds the channel to the dialog; BYE closes it. With
// ControlDialogRequired a Dialog-ID naming no dialog gets 481.
func TestControlDialogByInvite(t *testing.T) {
	m := newMediaRigCfg(t, 0, func(c *Config) { c.ControlDialogRequired = true })
	d := &dialog{callID: randHex(8), fromTag: randHex(4),
		uri: sip.Uri{Scheme: "sip", User: "wan0;1", Host: m.local.Addr().String(), Port: int(m.local.Port())}}
	res := m.request(sip.INVITE, d, cfwSDP("TCP", "active", "H839quwhjdhegvdga", ""))
	if res.StatusCode != 200 {
		t.Fatalf("INVITE: %d", res.StatusCode)
	}
	d.toTag, _ = res.To().Params.Get("tag")
	listen := m.a.Control().Listen
	ans := string(res.Body())
	for _, want := range []string{fmt.Sprintf("m=application %d TCP cfw\r\n", listen.Port()), "c=IN IP4 " + listen.Addr().String() + "\r\n",
		"a=setup:passive\r\n", "a=connection:new\r\n", "a=cfw-id:H839quwhjdhegvdga\r\n"} {
		if !strings.Contains(ans, want) {
			t.Errorf("answer lacks %q:\n%s", want, ans)
		}
	}
	if ct := res.GetHeader("Content-Type"); ct == nil || ct.Value() != "application/sdp" {
		t.Errorf("Content-Type %v", ct)
	}
	if len(m.a.MediaConnections()) != 0 || m.r.PortsInUse() != 0 {
		t.Errorf("a control dialog opened media")
	}

	// A Dialog-ID naming no dialog: 481 (RFC 6230 §8), the channel stays.
	c := m.control()
	if r := c.do(Frame{TransID: "sync0001", Method: "SYNC", Header: []Field{{"Dialog-ID", "nosuchdialog"}}}); r.Status != 481 {
		t.Fatalf("SYNC of an unknown dialog: %d", r.Status)
	}
	if r := c.do(Frame{TransID: "ka000001", Method: "K-ALIVE"}); r.Status != 406 {
		t.Fatalf("K-ALIVE after a failed SYNC: %d", r.Status)
	}
	if r := c.do(Frame{TransID: "sync0002", Method: "SYNC", Header: []Field{{"Dialog-ID", "H839quwhjdhegvdga"}, {"Packages", mixerPackage}}}); r.Status != 200 {
		t.Fatalf("SYNC of the dialog: %d", r.Status)
	}
	if st := m.a.Control(); len(st.Channels) != 1 || !st.Channels[0].Bound || st.Channels[0].DialogID != "H839quwhjdhegvdga" {
		t.Fatalf("channel status %+v", st.Channels)
	}
	// The same offer again (a refresh re-INVITE) keeps the dialog.
	if res := m.request(sip.INVITE, d, cfwSDP("TCP", "actpass", "H839quwhjdhegvdga", "")); res.StatusCode != 200 || string(res.Body()) != ans {
		t.Fatalf("re-INVITE: %d\n%s", res.StatusCode, res.Body())
	}
	if res := m.request(sip.INVITE, d, cfwSDP("TCP", "active", "other-id", "")); res.StatusCode != 488 {
		t.Fatalf("re-INVITE with another cfw-id: %d", res.StatusCode)
	}
	// A second dialog may not take the same cfw-id.
	d2 := &dialog{callID: randHex(8), fromTag: randHex(4), uri: d.uri}
	if res := m.request(sip.INVITE, d2, cfwSDP("TCP", "active", "H839quwhjdhegvdga", "")); res.StatusCode != 488 {
		t.Fatalf("duplicate cfw-id: %d", res.StatusCode)
	}

	// BYE ends the dialog and closes its channel; the id is unknown after.
	if res := m.request(sip.BYE, d, nil); res.StatusCode != 200 {
		t.Fatalf("BYE: %d", res.StatusCode)
	}
	c.closed()
	c2 := m.control()
	if r := c2.do(Frame{TransID: "sync0003", Method: "SYNC", Header: []Field{{"Dialog-ID", "H839quwhjdhegvdga"}}}); r.Status != 481 {
		t.Fatalf("SYNC after BYE: %d", r.Status)
	}
	if res := m.request(sip.BYE, d, nil); res.StatusCode != 481 {
		t.Fatalf("second BYE: %d", res.StatusCode)
	}
}

// Offers a control dialog cannot take: 488, nothing remembered.
func TestControlDialogRefused(t *testing.T) {
	m := newMediaRig(t, 0)
	for _, c := range []struct {
		name string
		sdp  []byte
	}{
		{"TLS", cfwSDP("TCP/TLS", "active", "id1", "")},
		{"UDP", cfwSDP("UDP", "active", "id1", "")},
		{"this side active", cfwSDP("TCP", "passive", "id1", "")},
		{"no cfw-id", cfwSDP("TCP", "active", "", "")},
		{"cfw-id not a token", cfwSDP("TCP", "active", "a b", "")},
		{"with audio", cfwSDP("TCP", "active", "id1", "m=audio 4000 RTP/AVP 0\r\n")},
		{"two cfw lines", cfwSDP("TCP", "active", "id1", "m=application 9 TCP cfw\r\na=cfw-id:id2\r\n")},
	} {
		d := &dialog{callID: randHex(8), fromTag: randHex(4),
			uri: sip.Uri{Scheme: "sip", User: "wan0;1", Host: m.local.Addr().String(), Port: int(m.local.Port())}}
		if res := m.request(sip.INVITE, d, c.sdp); res.StatusCode != 488 {
			t.Errorf("%s: %d, want 488", c.name, res.StatusCode)
		}
	}
	m.a.ms.mu.Lock()
	n := len(m.a.ms.ctlDlgs) + len(m.a.ms.ctlByDlg)
	m.a.ms.mu.Unlock()
	if n != 0 {
		t.Errorf("%d control dialogs remembered", n)
	}
	// Without ControlDialogRequired a Dialog-ID naming no dialog opens a
	// direct channel (ECSS-10 connects without an INVITE).
	c := m.control()
	if r := c.do(Frame{TransID: "sync0001", Method: "SYNC", Header: []Field{{"Dialog-ID", "ecss-direct"}}}); r.Status != 200 {
		t.Fatalf("direct SYNC: %d", r.Status)
	}
	if st := m.a.Control(); len(st.Channels) != 1 || st.Channels[0].Bound {
		t.Errorf("channel status %+v", st.Channels)
	}
}

func FuzzParseCFWOffer(f *testing.F) {
	f.Add(cfwSDP("TCP", "active", "H839quwhjdhegvdga", ""))
	f.Add(cfwSDP("TCP/TLS", "passive", "", "m=audio 1 RTP/AVP 0\r\n"))
	f.Add([]byte("v=0\r\nm=application 9 TCP cfw\nm=application 9 TCP cfw\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		o, ok, err := parseCFWOffer(b)
		if ok && err == nil && (o.id == "" || o.proto != "TCP" || o.other != 0 || len(o.id) > maxCFWID) {
			t.Fatalf("accepted %+v", o)
		}
	})
}

// A control dialog is the softswitch's: from another source 403; at most
// maxChannels of them, then 486.
func TestControlDialogLimits(t *testing.T) {
	m := newMediaRig(t, 0)
	u, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 9)})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	body := cfwSDP("TCP", "active", "stranger", "")
	msg := fmt.Sprintf("INVITE sip:wan0;1@%s SIP/2.0\r\nVia: SIP/2.0/UDP %s;branch=z9hG4bK%s\r\nFrom: <sip:x@127.0.0.9>;tag=abc\r\n"+
		"To: <sip:wan0;1@msr-kazan>\r\nCall-ID: %s\r\nCSeq: 1 INVITE\r\nMax-Forwards: 70\r\nContact: <sip:x@%s>\r\n"+
		"Content-Type: application/sdp\r\nContent-Length: %d\r\n\r\n%s", m.local, u.LocalAddr(), randHex(6), randHex(8), u.LocalAddr(), len(body), body)
	if _, err := u.WriteToUDPAddrPort([]byte(msg), m.local); err != nil {
		t.Fatal(err)
	}
	_ = u.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	n, err := u.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if line, _, _ := strings.Cut(string(buf[:n]), "\r\n"); !strings.HasPrefix(line, "SIP/2.0 403 ") {
		t.Fatalf("control INVITE from a stranger: %q", line)
	}

	for i := range maxChannels + 1 {
		d := &dialog{callID: randHex(8), fromTag: randHex(4),
			uri: sip.Uri{Scheme: "sip", User: "lan0;1", Host: m.local.Addr().String(), Port: int(m.local.Port())}}
		want := 200
		if i == maxChannels {
			want = 486
		}
		if res := m.request(sip.INVITE, d, cfwSDP("TCP", "", fmt.Sprintf("cc%d", i), "")); res.StatusCode != want {
			t.Fatalf("control dialog %d: %d, want %d", i, res.StatusCode, want)
		}
	}
}
