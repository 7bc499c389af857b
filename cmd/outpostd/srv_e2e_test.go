package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// hqZone serves _sip._udp.hq.test with two SRV priorities: hqa (10,
// 127.0.0.91) before hqb (20, 127.0.0.92); it returns the server's address.
func hqZone(t *testing.T) string {
	t.Helper()
	return serveZone(t, func(q dns.Question) []dns.RR {
		hdr := dns.RR_Header{Name: q.Name, Rrtype: q.Qtype, Class: dns.ClassINET, Ttl: 60}
		switch {
		case q.Qtype == dns.TypeSRV && q.Name == "_sip._udp.hq.test.":
			return []dns.RR{&dns.SRV{Hdr: hdr, Priority: 10, Weight: 10, Port: 5060, Target: "hqa.hq.test."},
				&dns.SRV{Hdr: hdr, Priority: 20, Weight: 10, Port: 5060, Target: "hqb.hq.test."}}
		case q.Qtype == dns.TypeA && q.Name == "hqa.hq.test.":
			return []dns.RR{&dns.A{Hdr: hdr, A: net.ParseIP("127.0.0.91")}}
		case q.Qtype == dns.TypeA && q.Name == "hqb.hq.test.":
			return []dns.RR{&dns.A{Hdr: hdr, A: net.ParseIP("127.0.0.92")}}
		}
		return nil
	})
}

// serveZone runs a real miekg/dns server on 127.0.0.1 (in the caller's
// namespace) that answers each question with answer's records until the
// test ends; it returns the server's address.
func serveZone(t *testing.T, answer func(q dns.Question) []dns.RR) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := dns.NewServeMux()
	mux.HandleFunc(".", func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		for _, q := range r.Question {
			m.Answer = append(m.Answer, answer(q)...)
		}
		_ = w.WriteMsg(m)
	})
	serveDNS(t, pc, mux)
	return pc.LocalAddr().String()
}

// TestHQFailoverBySRV: HQ found by SRV with two priorities. The first
// target's 503 or silence moves the call to the second; its 486 is the
// answer and the second target never sees the call. Each case runs on a
// fresh box (a failed target stays blocked for a while).
func TestHQFailoverBySRV(t *testing.T) {
	needSIPp(t)
	zone := hqZone(t)
	doc := benchDoc(2, loopbackListen, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "hq", "match": `^2\d{3}$`, "route": "hq"}}
		m["hq"] = map[string]any{"domain": "hq.test", "dns_servers": []string{zone}, "options_interval_ms": 600000}
	})
	cfg := writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc)
	caller := filepath.Join(t.TempDir(), "caller.csv")
	os.WriteFile(caller, []byte("SEQUENTIAL\nuser0000;[authentication username=user0000 password=pw0000];0;2001\n"), 0o600)

	for _, tc := range []struct {
		name    string
		first   func(t *testing.T) func() string // starts hqa; returns what it saw
		wantB   bool                             // hqb answers the call
		callErr string                           // the caller's failure, "" = answered
	}{
		{"503 is retried", func(t *testing.T) func() string {
			s := startSIPpServer(t, nil, "", "127.0.0.91", "uas_503.xml")
			return s.messages
		}, true, ""},
		{"486 is the answer", func(t *testing.T) func() string {
			s := startSIPpServer(t, nil, "", "127.0.0.91", "uas_486.xml")
			return s.messages
		}, false, "486"},
		{"silence is retried", func(t *testing.T) func() string {
			pc, err := net.ListenPacket("udp", "127.0.0.91:5060") // bound, never answers
			if err != nil {
				t.Fatal(err)
			}
			seen := make(chan string, 64)
			go func() {
				buf := make([]byte, 4096)
				for {
					n, _, err := pc.ReadFrom(buf)
					if err != nil {
						close(seen)
						return
					}
					seen <- string(buf[:n])
				}
			}()
			t.Cleanup(func() { pc.Close() })
			return func() string {
				var b strings.Builder
				for {
					select {
					case m, ok := <-seen:
						if !ok {
							return b.String()
						}
						b.WriteString(m)
					default:
						return b.String()
					}
				}
			}
		}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startDaemon(t, t.TempDir(), cfg)
			seenA := tc.first(t)
			hqb := startSIPpServer(t, nil, "", "127.0.0.92", "uas_answer.xml")
			out, err := sipp(t, "uac_call.xml", d.listener("udp"), caller, 1, 1)
			switch {
			case tc.callErr == "" && err != nil:
				t.Fatalf("call: %v\n%s", err, tail(out, 2000))
			case tc.callErr != "" && (err == nil || !strings.Contains(out, "SIP/2.0 "+tc.callErr)):
				t.Fatalf("call: %v, want the caller to get %s\n%s", err, tc.callErr, tail(out, 2000))
			}
			// The Request-URI names HQ's domain; the target is the next hop
			// only (each target here is its own SIPp or socket).
			if a := seenA(); !strings.Contains(a, "INVITE sip:2001@hq.test") {
				t.Errorf("the priority-10 target never got the INVITE:\n%s", tail(a, 1000))
			}
			gotB := strings.Contains(hqb.messages(), "INVITE sip:2001@hq.test")
			if gotB != tc.wantB {
				t.Errorf("priority-20 target got the INVITE: %v, want %v", gotB, tc.wantB)
			}
			d.stop()
		})
	}
}
