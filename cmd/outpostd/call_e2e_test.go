package main

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLocalCallWithSIPp: user0001 registers from a SIPp phone, user0000
// calls it through the box (authenticating with 407), the call is
// answered, ACKed and hung up; both SIPp runs must succeed.
func TestLocalCallWithSIPp(t *testing.T) { sippLocalCall(t, "uas_answer.xml", "uac_call.xml") }

// TestCallManyProvisionalsWithSIPp: the callee rings with 12 180s (an HQ
// ring group forking to many phones: more than sipgo's WaitAnswer takes)
// before it answers; the call goes up, every 180 reaches the caller, and
// the callee's 200 is ACKed.
func TestCallManyProvisionalsWithSIPp(t *testing.T) {
	sippLocalCall(t, "uas_ring_many.xml", "uac_call_ringmany.xml")
}

// sippLocalCall: user0000 (SIPp, callerScenario) calls user0001 (SIPp
// registered, then answering with calleeScenario) through the box; both
// scenarios must complete and no call may be left in progress.
func sippLocalCall(t *testing.T, calleeScenario, callerScenario string) {
	t.Helper()
	needSIPp(t)
	doc := benchDoc(3, loopbackListen, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^user\d{4}$`, "route": "local"}}
	})
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	udp := d.listener("udp")

	answered := answeringPhoneWith(t, udp, "user0001", "pw0001", calleeScenario)
	caller := filepath.Join(t.TempDir(), "caller.csv")
	if err := os.WriteFile(caller, []byte("SEQUENTIAL\nuser0000;[authentication username=user0000 password=pw0000];0;user0001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := sipp(t, callerScenario, udp, caller, 1, 1)
	if err != nil {
		t.Fatalf("caller: %v\n%s", err, tail(out, 3000))
	}
	answered()
	// The call is over on both sides: none is left in progress.
	if calls, err := d.api.Calls(t.Context()); err != nil || len(calls) != 0 {
		t.Fatalf("calls after hang-up: %v %+v", err, calls)
	}
	d.stop()
}

// answeringPhone registers user from a SIPp run bound to a fresh port, then
// starts a SIPp that answers one call on that port. The returned function
// waits for that call to have completed successfully.
func answeringPhone(t *testing.T, registrar, user, password string) func() {
	t.Helper()
	return answeringPhoneWith(t, registrar, user, password, "uas_answer.xml")
}

// answeringPhoneWith is answeringPhone with the callee's scenario.
func answeringPhoneWith(t *testing.T, registrar, user, password, scenario string) func() {
	t.Helper()
	return runUAS(t, scenario, "127.0.0.1", registerAt(t, registrar, user, password), "-aa")
}

// registerAt registers user with a Contact on a free port of 127.0.0.1
// on which nothing listens yet, and returns the port.
func registerAt(t *testing.T, registrar, user, password string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port)
	pc.Close()
	csv := filepath.Join(t.TempDir(), "callee.csv")
	if err := os.WriteFile(csv, []byte("SEQUENTIAL\n"+user+";[authentication username="+user+" password="+password+"];3600\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := sipp(t, "reg_auth.xml", registrar, csv, 1, 10, "-p", port); err != nil {
		t.Fatalf("%s registration: %v\n%s", user, err, tail(out, 2000))
	}
	return port
}

// answerOne starts a SIPp on ip:port that answers one call; the returned
// function waits for that call to have completed successfully. -aa answers
// the HQ prober's OPTIONS (and any NOTIFY/INFO) outside the scenario; those
// count as calls for -m, so the scenario itself stops SIPp after its call.
func answerOne(t *testing.T, ip, port string) func() {
	t.Helper()
	return runUAS(t, "uas_answer.xml", ip, port, "-aa")
}

// TestInboundDIDCall: the PSTN gateway (trusted by its address, no digest)
// calls a DID; the inbound rules route it to the user who owns it. Trust
// is by the gateway's configured udp address and port: the same INVITE
// from the gateway's IP but another port (a spoofed source), over TCP
// from that IP (the gateway is configured udp), or from anywhere else is
// a local caller's, challenged with 407 and not routed.
func TestInboundDIDCall(t *testing.T) {
	needSIPp(t)
	const gw = "127.0.0.77" // the PSTN gateway stand-in's own loopback address
	gwPort := freePort(t, gw)
	doc := benchDoc(3, loopbackListen, func(m map[string]any) {
		m["users"].([]map[string]any)[1]["did"] = "+78435550001"
		m["inbound"] = []map[string]any{{"match": `^\+7843555(\d{4})$`, "to": "user$1"}}
		m["pstn"] = map[string]any{"gateways": []map[string]any{{"name": "fxo", "target": gw + ":" + gwPort}}}
	})
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	udp := d.listener("udp")
	answered := answeringPhone(t, udp, "user0001", "pw0001")

	caller := filepath.Join(t.TempDir(), "pstn.csv")
	if err := os.WriteFile(caller, []byte("SEQUENTIAL\n+74950000000;;;+78435550001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := sipp(t, "uac_inbound.xml", udp, caller, 1, 1, "-i", gw, "-p", gwPort); err != nil {
		t.Fatalf("inbound call: %v\n%s", err, tail(out, 3000))
	}
	answered()
	for _, tc := range []struct {
		what   string
		target string
		args   []string
	}{
		{"from the gateway's IP but another port", udp, []string{"-i", gw, "-p", "0"}},
		{"over TCP from the gateway's IP", d.listener("tcp"), []string{"-i", gw, "-p", "0", "-t", "t1"}},
		{"from a non-gateway address", udp, nil},
	} {
		if out, err := sipp(t, "uac_inbound.xml", tc.target, caller, 1, 1, tc.args...); err == nil || !strings.Contains(out, "407 Proxy Authentication Required") {
			t.Fatalf("an unauthenticated INVITE %s was not challenged: %v\n%s", tc.what, err, tail(out, 2000))
		}
	}
	d.stop()
}

// freePort is a UDP port free on ip just now (SIPp binds it next).
func freePort(t *testing.T, ip string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	return strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port)
}

// TestHQCallFailover: a call to an HQ extension tries the HQ targets in
// order; the first never answers (no response within the attempt time),
// the second (a SIPp stand-in for the HQ softswitch) answers.
func TestHQCallFailover(t *testing.T) {
	needSIPp(t)
	const hq = "127.0.0.88"
	// Bound but silent: a black hole. Not on 127.0.0.1, where the phones
	// are: the box trusts calls from HQ targets' addresses.
	dead, err := net.ListenPacket("udp", "127.0.0.86:0")
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	doc := benchDoc(3, loopbackListen, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "hq", "match": `^2\d{3}$`, "route": "hq"}}
		m["hq"] = map[string]any{"targets": []string{dead.LocalAddr().String(), hq + ":5060"}}
	})
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	udp := d.listener("udp")

	answered := answerOne(t, hq, "5060")

	caller := filepath.Join(t.TempDir(), "caller.csv")
	if err := os.WriteFile(caller, []byte("SEQUENTIAL\nuser0000;[authentication username=user0000 password=pw0000];0;2001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := sipp(t, "uac_call.xml", udp, caller, 1, 1); err != nil {
		t.Fatalf("call to HQ: %v\n%s", err, tail(out, 3000))
	}
	answered()
	// The silent target saw the INVITE first (and is now blocked for a
	// while); OPTIONS probes may have reached it too.
	buf := make([]byte, 4096)
	dead.SetReadDeadline(time.Now().Add(time.Second))
	for {
		n, _, err := dead.ReadFrom(buf)
		if err != nil {
			t.Fatalf("first HQ target never saw the INVITE: %v", err)
		}
		if strings.HasPrefix(string(buf[:n]), "INVITE sip:2001@") {
			break
		}
		if !strings.HasPrefix(string(buf[:n]), "OPTIONS ") {
			t.Fatalf("first HQ target got %q", buf[:min(n, 60)])
		}
	}
	d.stop()
}

// TestInboundFromHQ: HQ (trusted by its address, like a PSTN gateway)
// calls a branch user by extension — the call upstream registration makes
// possible — and the user's phone answers; the same INVITE from HQ's IP
// but another port, or from elsewhere, is challenged. A server inside
// hq.trusted_networks is trusted as HQ from any port.
func TestInboundFromHQ(t *testing.T) {
	needSIPp(t)
	const hq = "127.0.0.87"
	const hqOther = "127.0.0.93" // another HQ server, in hq.trusted_networks
	hqPort := freePort(t, hq)
	doc := benchDoc(3, loopbackListen, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "hq", "match": `^2\d{3}$`, "route": "hq"}}
		m["hq"] = map[string]any{"targets": []string{hq + ":" + hqPort}, "trusted_networks": []string{"127.0.0.92/30"}}
	})
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	udp := d.listener("udp")
	answered := answeringPhone(t, udp, "user0001", "pw0001")
	caller := filepath.Join(t.TempDir(), "hq.csv")
	if err := os.WriteFile(caller, []byte("SEQUENTIAL\n2001;;;user0001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// -aa: the HQ stand-in also answers the box's OPTIONS probes.
	if out, err := sipp(t, "uac_inbound.xml", udp, caller, 1, 1, "-i", hq, "-p", hqPort, "-aa"); err != nil {
		t.Fatalf("call from HQ: %v\n%s", err, tail(out, 3000))
	}
	answered()
	for _, args := range [][]string{{"-i", hq, "-p", "0"}, nil} {
		if out, err := sipp(t, "uac_inbound.xml", udp, caller, 1, 1, args...); err == nil || !strings.Contains(out, "407 Proxy Authentication Required") {
			t.Fatalf("the same INVITE from %v (not HQ's address and port) was not challenged: %v\n%s", args, err, tail(out, 2000))
		}
	}
	answered = answeringPhone(t, udp, "user0002", "pw0002")
	other := writeCSV(t, "2002;;;user0002")
	if out, err := sipp(t, "uac_inbound.xml", udp, other, 1, 1, "-i", hqOther, "-p", "0"); err != nil {
		t.Fatalf("call from a server in hq.trusted_networks: %v\n%s", err, tail(out, 3000))
	}
	answered()
	d.stop()
}

// TestForkingAndCancelWithSIPp: a user registered from two phones rings
// both; the first to answer takes the call and the other gets a CANCEL.
// Then a caller that hangs up while the callee rings: the callee gets the
// CANCEL and the caller its 487.
func TestForkingAndCancelWithSIPp(t *testing.T) {
	needSIPp(t)
	doc := benchDoc(3, loopbackListen, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^user\d{4}$`, "route": "local"}}
	})
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	udp := d.listener("udp")
	desk := sippPhone(t, udp, "user0001", "pw0001", "uas_answer.xml", "")
	mobile := sippPhone(t, udp, "user0001", "pw0001", "uas_ring.xml", "")
	caller := writeCSV(t, "user0000;[authentication username=user0000 password=pw0000];0;user0001")
	if out, err := sipp(t, "uac_call.xml", udp, caller, 1, 1); err != nil {
		t.Fatalf("call to a user with two phones: %v\n%s", err, tail(out, 3000))
	}
	desk()   // answered
	mobile() // got the CANCEL: its scenario requires it

	ringing := sippPhone(t, udp, "user0002", "pw0002", "uas_ring.xml", "")
	caller = writeCSV(t, "user0000;[authentication username=user0000 password=pw0000];0;user0002")
	if out, err := sipp(t, "uac_cancel.xml", udp, caller, 1, 1); err != nil {
		t.Fatalf("caller cancelling while ringing: %v\n%s", err, tail(out, 3000))
	}
	ringing() // the CANCEL reached the callee
	d.stop()
}

// TestReliableProvisionalsWithSIPp: RFC 3262 both ways through the
// daemon. The callee answers with a reliable 183 with SDP and a 200
// without; the box PRACKs it (the callee's scenario checks RAck). The
// caller's INVITE requires 100rel: it gets the 183 reliably (its scenario
// checks Require and RSeq), PRACKs it, and the 200 carries the callee's
// answer from the 183.
func TestReliableProvisionalsWithSIPp(t *testing.T) {
	sippLocalCall(t, "uas_100rel.xml", "uac_call_100rel.xml")
}

// TestHQRetry5xxWithSIPp: HQ's first target answers 500, by default the
// call's answer; the document's hq.failover.retry_5xx [500] makes the box
// try the next target, which answers. (The limits' other fields, and the
// default, are the b2bua package's tests.)
func TestHQRetry5xxWithSIPp(t *testing.T) {
	needSIPp(t)
	const hq1, hq2 = "127.0.0.97", "127.0.0.98"
	doc := benchDoc(3, loopbackListen, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "hq", "match": `^2\d{3}$`, "route": "hq"}}
		m["hq"] = map[string]any{"targets": []string{hq1 + ":5060", hq2 + ":5060"},
			"failover": map[string]any{"retry_5xx": []int{500}, "max_targets": 2}}
	})
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	first := startSIPpServer(t, nil, "", hq1, "uas_500.xml")
	second := startSIPpServer(t, nil, "", hq2, "uas_answer_each.xml")
	caller := filepath.Join(t.TempDir(), "caller.csv")
	if err := os.WriteFile(caller, []byte("SEQUENTIAL\nuser0000;[authentication username=user0000 password=pw0000];0;2001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := sipp(t, "uac_call.xml", d.listener("udp"), caller, 1, 1); err != nil {
		t.Fatalf("call to HQ: %v\n%s", err, tail(out, 3000))
	}
	if n := len(first.times("received", "INVITE sip:2001@")); n != 1 {
		t.Errorf("the first HQ target got %d INVITEs, want 1\n%s", n, tail(first.messages(), 2000))
	}
	if n := len(second.times("received", "INVITE sip:2001@")); n != 1 {
		t.Errorf("the second HQ target got %d INVITEs, want 1 (after the first's 500)\n%s", n, tail(second.messages(), 2000))
	}
	d.stop()
}
