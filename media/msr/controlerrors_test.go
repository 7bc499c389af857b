package msr

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"
)

// awaitNoChannels polls (no event says a server goroutine has finished)
// until the control listener has no channel left.
func awaitNoChannels(t *testing.T, a *Agent) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(a.Control().Channels) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("channels left: %+v", a.Control().Channels)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func syncedControl(t *testing.T, m *mediaRig) *cfwClient {
	t.Helper()
	c := m.control()
	if r := c.do(Frame{TransID: "sync" + randHex(3), Method: "SYNC", Header: []Field{{"Dialog-ID", "d1"}, {"Packages", mixerPackage}}}); r.Status != 200 {
		t.Fatalf("SYNC: %d", r.Status)
	}
	return c
}

// A channel dropped in the middle of a transaction: a CONTROL cut short
// does nothing; one received whole is carried out even if its answer
// cannot be written (the joins belong to the connections, not to the
// channel: a softswitch that reconnects finds them in audit, and BYE
// frees them). No channel is left behind either way.
func TestControlDroppedMidTransaction(t *testing.T) {
	m := newMediaRig(t, 0)
	p1, p2 := newPeer(t, "127.0.0.5"), newPeer(t, "127.0.0.6")
	d1, _ := m.invite("wan0", p1, "0 PCMU")
	d2, _ := m.invite("lan0", p2, "0 PCMU")
	join := Frame{TransID: "join0001", Method: "CONTROL", Header: []Field{{"Control-Package", mixerPackage}, {"Content-Type", mixerContentType}},
		Body: []byte(fmt.Sprintf(`<mscmixer version="1.0" xmlns="urn:ietf:params:xml:ns:msc-mixer"><join id1="%s" id2="%s"/></mscmixer>`, d1.id(), d2.id()))}
	wire := join.Marshal()

	c := syncedControl(t, m)
	if _, err := c.c.Write(wire[:len(wire)-20]); err != nil {
		t.Fatal(err)
	}
	c.c.Close()
	awaitNoChannels(t, m.a)
	c = syncedControl(t, m)
	if _, body := mixer(c, "aud00001", `<audit capabilities="false"/>`); strings.Contains(body, "<joinaudit") {
		t.Fatalf("a truncated CONTROL joined: %s", body)
	}

	// Whole, then gone before the answer.
	c2 := syncedControl(t, m)
	if _, err := c2.c.Write(wire); err != nil {
		t.Fatal(err)
	}
	c2.c.Close()
	awaitJoined(t, m, d1.id())
	_, body := mixer(c, "aud00002", `<audit capabilities="false"/>`)
	if !strings.Contains(body, `<joinaudit id1=`) {
		t.Fatalf("audit after the dropped channel: %s", body)
	}
	p1.send(d1.answer, 0, 3)
	p2.expect("media of the join made by the dropped channel", 3)
	c.c.Close()
	awaitNoChannels(t, m.a)
	for _, d := range []*dialog{d1, d2} {
		if res := m.request(sip.BYE, d, nil); res.StatusCode != 200 {
			t.Fatalf("BYE: %d", res.StatusCode)
		}
	}
	if n, conns := m.r.PortsInUse(), m.a.MediaConnections(); n != 0 || len(conns) != 0 {
		t.Fatalf("after BYE: %d ports, connections %+v", n, conns)
	}
}

// awaitJoined polls (the CONTROL's answer went nowhere) until connection
// id is joined.
func awaitJoined(t *testing.T, m *mediaRig, id string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, c := range m.a.MediaConnections() {
			if c.ID == id && c.JoinedTo != "" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not joined: %+v", id, m.a.MediaConnections())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Requests the framework or the package refuses, each with its code: the
// framework's in the CFW status (RFC 6230 §8), the package's in the
// <response status> of a CFW 200 (RFC 6505 §4.6, §5).
func TestControlRefusals(t *testing.T) {
	m := newMediaRig(t, 0)
	p1, p2 := newPeer(t, "127.0.0.5"), newPeer(t, "127.0.0.6")
	d1, _ := m.invite("wan0", p1, "0 PCMU")
	d2, _ := m.invite("lan0", p2, "8 PCMA")
	c := m.control()
	if r := c.do(Frame{TransID: "ctl00001", Method: "CONTROL", Header: []Field{{"Control-Package", mixerPackage}}, Body: []byte("<x/>")}); r.Status != 406 {
		t.Errorf("CONTROL before SYNC: %d, want 406", r.Status)
	}
	if r := c.do(Frame{TransID: "rep00001", Method: "REPORT"}); r.Status != 406 {
		t.Errorf("REPORT before SYNC: %d, want 406", r.Status)
	}
	// Packages none of which is served: 422, still unsynced.
	if r := c.do(Frame{TransID: "sync0001", Method: "SYNC", Header: []Field{{"Dialog-ID", "d1"}, {"Packages", "msc-ivr/1.0"}}}); r.Status != 422 {
		t.Errorf("SYNC for msc-ivr only: %d, want 422", r.Status)
	}
	if r := c.do(Frame{TransID: "sync0002", Method: "SYNC", Header: []Field{{"Dialog-ID", "d1"}, {"Packages", mixerPackage}}}); r.Status != 200 {
		t.Fatalf("SYNC: %d", r.Status)
	}
	for _, x := range []struct {
		name string
		f    Frame
		want int
	}{
		{"no Control-Package", Frame{Method: "CONTROL", Body: []byte("<x/>")}, 400},
		{"other Content-Type", Frame{Method: "CONTROL", Header: []Field{{"Control-Package", mixerPackage}, {"Content-Type", "text/plain"}}, Body: []byte("<x/>")}, 400},
		{"package not asked for in SYNC", Frame{Method: "CONTROL", Header: []Field{{"Control-Package", "msc-ivr/1.0"}}, Body: []byte("<x/>")}, 420},
		{"REPORT (servers send it)", Frame{Method: "REPORT"}, 405},
		{"unknown method", Frame{Method: "PUBLISH"}, 405},
	} {
		x.f.TransID = "req" + randHex(3)
		if r := c.do(x.f); r.Status != x.want {
			t.Errorf("%s: %d, want %d", x.name, r.Status, x.want)
		}
	}
	j := func(kind, a, b string) string { return fmt.Sprintf(`<%s id1="%s" id2="%s"/>`, kind, a, b) }
	for _, x := range []struct {
		name, body string
		want       int
	}{
		{"not XML", "<join", 400},
		{"two requests", "<join/><unjoin/>", 400},
		{"no id2", `<join id1="a:b"/>`, 400},
		{"bad direction", fmt.Sprintf(`<join id1="%s" id2="%s"><stream media="audio" direction="sideways"/></join>`, d1.id(), d2.id()), 400},
		{"conference request", `<createconference/>`, 422},
		{"video", fmt.Sprintf(`<join id1="%s" id2="%s"><stream media="video"/></join>`, d1.id(), d2.id()), 422},
		{"unknown connection", j("join", d1.id(), "aaaa:bbbb"), 412},
		{"unknown connection, modifyjoin", j("modifyjoin", "aaaa:bbbb", d2.id()), 412},
		{"unknown connection, unjoin", j("unjoin", d1.id(), "aaaa:bbbb"), 412},
		{"conference id", j("join", d1.id(), "conf1"), 406},
		{"itself", j("join", d1.id(), d1.id()), 407},
		{"modifyjoin not joined", j("modifyjoin", d1.id(), d2.id()), 409},
		{"unjoin not joined", j("unjoin", d1.id(), d2.id()), 409},
		{"audit of a mixer", `<audit mixerid="conf1"/>`, 406},
	} {
		f, body := mixer(c, "mix"+randHex(3), x.body)
		if f.Status != 200 {
			t.Errorf("%s: CFW %d, want 200", x.name, f.Status)
			continue
		}
		if !strings.Contains(body, fmt.Sprintf(`status="%d"`, x.want)) {
			t.Errorf("%s: %s, want status %d", x.name, body, x.want)
		}
	}
	// Nothing of it changed anything.
	for _, mc := range m.a.MediaConnections() {
		if mc.JoinedTo != "" {
			t.Errorf("joined after refusals: %+v", mc)
		}
	}
}
