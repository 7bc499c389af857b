package main

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost/outpost/appliance/api"
)

var loopbackListen = []string{"udp:127.0.0.1:0", "tcp:127.0.0.1:0"}

// step names a phase of a long scenario in the log; the phases share one
// daemon (and its restarts), so they are not subtests.
func step(t *testing.T, name string, f func()) {
	t.Helper()
	t.Logf("--- %s", name)
	f()
}

// TestRegistrarWithSIPp walks the registrar's life with SIPp as the phones:
// 1000 users register with digest auth, wrong passwords are refused,
// unregistration, TCP, restart with bindings kept, and expiry.
func TestRegistrarWithSIPp(t *testing.T) {
	needSIPp(t)
	dir := t.TempDir()
	cfg := writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), benchDoc(1000, loopbackListen, func(d map[string]any) {
		d["sip"].(map[string]any)["registrar"] = map[string]any{"auth_fail_limit": 1000, "storm_rate": -1}
	}))
	d := startDaemon(t, dir, cfg)
	udp := d.listener("udp")

	step(t, "1000 users register", func() {
		out, err := sipp(t, "reg_auth.xml", udp, usersCSV(t, 1000, rightPassword, 3600), 1000, 500)
		if err != nil {
			t.Fatalf("sipp: %v\n%s", err, tail(out, 3000))
		}
		s := d.status()
		if s.AORs != 1000 || s.Bindings != 1000 {
			t.Fatalf("after 1000 registrations: %d users, %d bindings", s.AORs, s.Bindings)
		}
		rs, err := d.api.Registrations(t.Context())
		if err != nil || len(rs) != 1000 || rs[0].AOR != "user0000" || !strings.HasPrefix(rs[0].Source, "udp:127.0.0.1:") {
			t.Fatalf("registrations: %v, %d, first %+v", err, len(rs), rs[0])
		}
	})

	step(t, "wrong password refused", func() {
		before := d.status()
		out, err := sipp(t, "reg_wrong.xml", udp, usersCSV(t, 20, func(int) string { return "not-the-password" }, 3600), 20, 100)
		if err != nil {
			t.Fatalf("sipp (expects 403 for each): %v\n%s", err, tail(out, 3000))
		}
		s := d.status()
		if got := s.Registrar.AuthFailures - before.Registrar.AuthFailures; got != 20 {
			t.Fatalf("auth failures +%d, want +20", got)
		}
		if s.Bindings != before.Bindings {
			t.Fatalf("bindings changed by refused registrations: %d -> %d", before.Bindings, s.Bindings)
		}
	})

	step(t, "unregister", func() {
		out, err := sipp(t, "unreg.xml", udp, usersCSV(t, 100, rightPassword, 0), 100, 200)
		if err != nil {
			t.Fatalf("sipp: %v\n%s", err, tail(out, 3000))
		}
		if s := d.status(); s.AORs != 900 || s.Bindings != 900 {
			t.Fatalf("after unregistering 100: %d users, %d bindings", s.AORs, s.Bindings)
		}
	})

	step(t, "tcp", func() {
		out, err := sipp(t, "reg_auth.xml", d.listener("tcp"), usersCSV(t, 50, rightPassword, 3600), 50, 100, "-t", "t1")
		if err != nil {
			t.Fatalf("sipp over TCP: %v\n%s", err, tail(out, 3000))
		}
		s := d.status()
		if s.AORs != 950 || s.Bindings != 950 {
			t.Fatalf("after 50 TCP registrations of unregistered users: %d users, %d bindings", s.AORs, s.Bindings)
		}
	})

	step(t, "restart keeps bindings", func() {
		before, err := d.api.Registrations(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		d.stop()
		d = startDaemon(t, dir, "") // no --config: the stored version runs
		after, err := d.api.Registrations(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != len(before) {
			t.Fatalf("restart: %d bindings before, %d after", len(before), len(after))
		}
		for i := range before {
			if before[i].AOR != after[i].AOR || before[i].Contact != after[i].Contact || !before[i].Expires.Equal(after[i].Expires) {
				t.Fatalf("binding %d changed across restart:\n%+v\n%+v", i, before[i], after[i])
			}
		}
		udp = d.listener("udp") // port 0 again: a new port after restart
	})

	step(t, "expiry", func() {
		// Users 0..9 were unregistered above; register them for 2 s only.
		out, err := sipp(t, "reg_auth.xml", udp, usersCSV(t, 10, rightPassword, 2), 10, 100)
		if err != nil {
			t.Fatalf("sipp: %v\n%s", err, tail(out, 3000))
		}
		if s := d.status(); s.Bindings != 960 {
			t.Fatalf("after 10 short registrations: %d bindings, want 960", s.Bindings)
		}
		// Expired bindings vanish from view at once and are swept (and
		// counted, and deleted from the store) within a second.
		d.waitFor("short bindings expire", 10*time.Second, func(s api.Status) bool {
			return s.Bindings == 950 && s.Registrar.Expired >= 10
		})
	})
	d.stop()
}

// TestRegistrationStorm: 1000 phones re-register at once against a guard
// admitting 100 new registrations/s; every phone ends up registered, none
// times out (SIPp would count a timeout as a failed call).
func TestRegistrationStorm(t *testing.T) {
	needSIPp(t)
	cfg := writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), benchDoc(1000, loopbackListen, func(d map[string]any) {
		d["sip"].(map[string]any)["registrar"] = map[string]any{"storm_rate": 100, "retry_after_s": 1}
	}))
	d := startDaemon(t, t.TempDir(), cfg)
	out, err := sipp(t, "reg_storm.xml", d.listener("udp"), usersCSV(t, 1000, rightPassword, 3600), 1000, 1000)
	if err != nil {
		t.Fatalf("sipp: %v\n%s", err, tail(out, 3000))
	}
	s := d.status()
	if s.Bindings != 1000 {
		t.Fatalf("%d bindings after the storm, want 1000", s.Bindings)
	}
	if s.Registrar.StormRefused == 0 {
		t.Fatal("the storm guard never answered 503: the test did not create a storm")
	}
	t.Logf("storm: %d refused with 503 before all 1000 registered", s.Registrar.StormRefused)
	d.stop()
}

// TestMalformedMessages throws broken SIP at both transports; the daemon
// must answer 400 where it can, never crash, and keep serving.
func TestMalformedMessages(t *testing.T) {
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), benchDoc(2, loopbackListen, nil)))
	udp, tcp := d.listener("udp"), d.listener("tcp")

	valid := "OPTIONS sip:127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:%d;branch=z9hG4bK%s\r\nMax-Forwards: 70\r\n" +
		"From: <sip:probe@127.0.0.1>;tag=1\r\nTo: <sip:127.0.0.1>\r\nCall-ID: %s\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n"
	cases := map[string]string{
		"garbage":            "\x00\x01\x02 hello there \xff\xfe",
		"empty lines":        "\r\n\r\n\r\n",
		"truncated headers":  "REGISTER sip:127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5099;branch=z9hG4bKtr\r\nFrom: <sip:a@b>;ta",
		"bad content-length": "REGISTER sip:127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5099;branch=z9hG4bKcl\r\nFrom: <sip:user0000@bench.local>;tag=1\r\nTo: <sip:user0000@bench.local>\r\nCall-ID: cl\r\nCSeq: 1 REGISTER\r\nContent-Length: 99999\r\n\r\nshort",
		"negative length":    "REGISTER sip:127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5099;branch=z9hG4bKneg\r\nFrom: <sip:user0000@bench.local>;tag=1\r\nTo: <sip:user0000@bench.local>\r\nCall-ID: neg\r\nCSeq: 1 REGISTER\r\nContent-Length: -5\r\n\r\n",
		"missing via":        "REGISTER sip:127.0.0.1 SIP/2.0\r\nFrom: <sip:user0000@bench.local>;tag=1\r\nTo: <sip:user0000@bench.local>\r\nCall-ID: novia\r\nCSeq: 1 REGISTER\r\nContent-Length: 0\r\n\r\n",
		"missing cseq":       "REGISTER sip:127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5099;branch=z9hG4bKnocseq\r\nFrom: <sip:user0000@bench.local>;tag=1\r\nTo: <sip:user0000@bench.local>\r\nCall-ID: nocseq\r\nContent-Length: 0\r\n\r\n",
		"bad request line":   "REGISTER\r\nVia: SIP/2.0/UDP 127.0.0.1:5099;branch=z9hG4bKrl\r\n\r\n",
		"bad contact":        "REGISTER sip:127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5099;branch=z9hG4bKbc\r\nFrom: <sip:user0000@bench.local>;tag=1\r\nTo: <sip:user0000@bench.local>\r\nCall-ID: bc\r\nCSeq: 1 REGISTER\r\nContact: <<<sip:@@@;;;\r\nContent-Length: 0\r\n\r\n",
		"bad authorization":  "REGISTER sip:127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5099;branch=z9hG4bKba\r\nFrom: <sip:user0000@bench.local>;tag=1\r\nTo: <sip:user0000@bench.local>\r\nCall-ID: ba\r\nCSeq: 1 REGISTER\r\nContact: <sip:user0000@127.0.0.1>\r\nAuthorization: Digest username=\"user0000\", nonce=\"\\\r\nContent-Length: 0\r\n\r\n",
		"oversized datagram": "OPTIONS sip:127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5099;branch=z9hG4bKbig\r\nX-Fill: " + strings.Repeat("A", 65000) + "\r\n\r\n",
		"binary header":      "OPTIONS sip:127.0.0.1 SIP/2.0\r\nVia: \x00\x00\x00\r\nCall-ID: \xff\r\n\r\n",
	}

	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dst, _ := net.ResolveUDPAddr("udp", udp)
	port := conn.LocalAddr().(*net.UDPAddr).Port
	probe := func(name string) {
		t.Helper()
		id := strings.ReplaceAll(name, " ", "-")
		if _, err := conn.WriteTo([]byte(fmt.Sprintf(valid, port, id, "probe-"+id)), dst); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 65536)
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			n, _, err := conn.ReadFrom(buf)
			if err != nil {
				t.Fatalf("after %q: no answer to a valid OPTIONS: %v", name, err)
			}
			if msg := string(buf[:n]); strings.Contains(msg, "probe-"+id) {
				if !strings.HasPrefix(msg, "SIP/2.0 200") {
					t.Fatalf("after %q: OPTIONS answered %q", name, strings.SplitN(msg, "\r\n", 2)[0])
				}
				return
			}
		}
	}
	for name, m := range cases {
		if _, err := conn.WriteTo([]byte(m), dst); err != nil && !strings.Contains(err.Error(), "message too long") {
			t.Fatalf("%s: %v", name, err)
		}
		probe(name)
		d.alive()
	}
	if s := d.status(); s.SIPDropped == 0 {
		t.Error("status counts no dropped garbage datagrams")
	}
	// The same over one TCP connection each: the daemon may close it, but must live on.
	for name, m := range cases {
		c, err := net.Dial("tcp", tcp)
		if err != nil {
			t.Fatalf("tcp %s: %v", name, err)
		}
		c.Write([]byte(m))
		c.Close()
		probe("tcp " + name)
		d.alive()
	}
	d.stop()
}
