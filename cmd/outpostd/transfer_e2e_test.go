package main

// End-to-end tests of the B2BUA's in-dialog features through the real
// daemon: hold (re-INVITE), blind and attended transfer (REFER), and
// voicemail forwarding. SIPp plays the phones where it can; the attended
// transferor, which needs two calls at once, is a sipgo phone.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
)

// localDoc is benchDoc with a dial plan that routes userNNNN locally.
func localDoc(extra func(map[string]any)) map[string]any {
	return benchDoc(3, loopbackListen, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^user\d{4}$`, "route": "local"}}
		if extra != nil {
			extra(m)
		}
	})
}

// freeUDPPort returns a port that was free a moment ago on 127.0.0.1.
func freeUDPPort(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	return strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port)
}

// writeCSV writes SIPp injection data.
func writeCSV(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "data.csv")
	if err := os.WriteFile(p, []byte("SEQUENTIAL\n"+strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// sippPhone registers user from a fresh port, then runs the UAS scenario
// on that port for one call (inf: optional -inf file). The returned
// function waits for the scenario to have succeeded.
func sippPhone(t *testing.T, registrar, user, password, scenario, inf string) func() {
	t.Helper()
	port := freeUDPPort(t)
	reg := writeCSV(t, user+";[authentication username="+user+" password="+password+"];3600")
	if out, err := sipp(t, "reg_auth.xml", registrar, reg, 1, 10, "-p", port); err != nil {
		t.Fatalf("%s registration: %v\n%s", user, err, tail(out, 2000))
	}
	return sippUAS(t, scenario, "127.0.0.1", port, inf)
}

// sippUAS runs a UAS scenario for one call on ip:port.
func sippUAS(t *testing.T, scenario, ip, port, inf string) func() {
	t.Helper()
	flags := []string{"-m", "1"}
	if inf != "" {
		flags = append(flags, "-inf", inf)
	}
	return runUAS(t, scenario, ip, port, flags...)
}

// runUAS starts a SIPp UAS scenario on ip:port with flags; the returned
// function waits for SIPp to have ended successfully (exit 0, or 97 when
// the scenario stops SIPp itself).
func runUAS(t *testing.T, scenario, ip, port string, flags ...string) func() {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	sf, _ := filepath.Abs(filepath.Join("testdata", "sipp", scenario))
	args := append([]string{"-sf", sf, "-i", ip, "-p", port, "-nostdin", "-timeout", "80", "-timeout_error",
		"-recv_timeout", "40000", "-trace_err"}, flags...)
	uas := exec.CommandContext(ctx, "sipp", args...)
	uas.Dir = t.TempDir()
	out := &syncBuffer{}
	uas.Stdout, uas.Stderr = out, out
	if err := uas.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- uas.Wait() }()
	t.Cleanup(func() { cancel(); <-done })
	return func() {
		t.Helper()
		select {
		case err := <-done:
			done <- err // for the cleanup
			// 97: the scenario itself stopped SIPp after its call (stop_now).
			if ee, ok := err.(*exec.ExitError); err != nil && !(ok && ee.ExitCode() == 97) {
				errs, _ := os.ReadFile(filepath.Join(uas.Dir, strings.TrimSuffix(scenario, ".xml")+"_"+strconv.Itoa(uas.Process.Pid)+"_errors.log"))
				t.Fatalf("%s: %v\n%s\n%s", scenario, err, tail(out.String(), 3000), tail(string(errs), 3000))
			}
		case <-ctx.Done():
			t.Fatalf("%s did not finish", scenario)
		}
	}
}

// TestHoldReinviteWithSIPp: the caller puts an answered call on hold
// with a re-INVITE (a=sendonly). The callee must receive a re-INVITE in
// its own dialog whose SDP says sendonly (its scenario checks it) and the
// caller must get the callee's 200 with a=recvonly (checked by its own).
func TestHoldReinviteWithSIPp(t *testing.T) {
	needSIPp(t)
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), localDoc(nil)))
	udp := d.listener("udp")
	callee := sippPhone(t, udp, "user0001", "pw0001", "uas_hold.xml", "")
	caller := writeCSV(t, "user0000;[authentication username=user0000 password=pw0000];0;user0001")
	if out, err := sipp(t, "uac_hold.xml", udp, caller, 1, 1); err != nil {
		t.Fatalf("caller: %v\n%s", err, tail(out, 3000))
	}
	callee()
	if calls, err := d.api.Calls(t.Context()); err != nil || len(calls) != 0 {
		t.Fatalf("calls after hang-up: %v %+v", err, calls)
	}
	d.stop()
}

// TestBlindTransferWithSIPp: user0000 calls user0001, who REFERs it to
// user0002. user0001's scenario checks the 202 and both NOTIFYs and gets
// its BYE; user0002's checks that the INVITE comes from user0000 with
// user0000's session and Referred-By; user0000's checks the re-INVITE
// carrying user0002's session (o= continued), then hangs up on user0002.
func TestBlindTransferWithSIPp(t *testing.T) {
	needSIPp(t)
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), localDoc(nil)))
	udp := d.listener("udp")
	transferor := sippPhone(t, udp, "user0001", "pw0001", "uas_refer.xml", writeCSV(t, "user0002"))
	target := sippPhone(t, udp, "user0002", "pw0002", "uas_target.xml", "")
	caller := writeCSV(t, "user0000;[authentication username=user0000 password=pw0000];0;user0001")
	if out, err := sipp(t, "uac_transferee.xml", udp, caller, 1, 1); err != nil {
		t.Fatalf("transferee: %v\n%s", err, tail(out, 3000))
	}
	transferor()
	target()
	if calls, err := d.api.Calls(t.Context()); err != nil || len(calls) != 0 {
		t.Fatalf("calls after hang-up: %v %+v", err, calls)
	}
	d.stop()
}

// sipgoPhone is a minimal phone on sipgo for what SIPp cannot script: two
// calls at once (an attended transfer's transferor).
type sipgoPhone struct {
	t        *testing.T
	user, pw string
	addr     string
	cli      *sipgo.Client
	dsc      *sipgo.DialogServerCache
	dcc      *sipgo.DialogClientCache
	answered chan *sipgo.DialogServerSession
	notifies chan *sip.Request
	byes     chan *sip.Request
}

func newSipgoPhone(t *testing.T, user, pw string) *sipgoPhone {
	t.Helper()
	ua, err := sipgo.NewUA(sipgo.WithUserAgent("e2e-" + user))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := sipgo.NewServer(ua)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &sipgoPhone{t: t, user: user, pw: pw, addr: conn.LocalAddr().String(),
		answered: make(chan *sipgo.DialogServerSession, 4), notifies: make(chan *sip.Request, 8), byes: make(chan *sip.Request, 8)}
	if p.cli, err = sipgo.NewClient(ua, sipgo.WithClientConnectionAddr(p.addr)); err != nil {
		t.Fatal(err)
	}
	host, port, _ := sip.ParseAddr(p.addr)
	contact := sip.ContactHeader{Address: sip.Uri{Scheme: "sip", User: user, Host: host, Port: port}}
	p.dsc = sipgo.NewDialogServerCache(p.cli, contact)
	p.dcc = sipgo.NewDialogClientCache(p.cli, contact)
	srv.OnInvite(func(req *sip.Request, tx sip.ServerTransaction) {
		d, err := p.dsc.ReadInvite(req, tx)
		if err != nil {
			t.Errorf("%s: %v", user, err)
			return
		}
		sdp := "v=0\r\no=- 2 2 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 40002 RTP/AVP 0\r\n"
		if err := d.Respond(200, "OK", []byte(sdp), sip.NewHeader("Content-Type", "application/sdp")); err != nil {
			t.Errorf("%s: answer: %v", user, err)
			return
		}
		p.answered <- d
	})
	srv.OnAck(func(req *sip.Request, tx sip.ServerTransaction) { _ = p.dsc.ReadAck(req, tx) })
	srv.OnBye(func(req *sip.Request, tx sip.ServerTransaction) {
		if p.dsc.ReadBye(req, tx) != nil && p.dcc.ReadBye(req, tx) != nil {
			_ = tx.Respond(sip.NewResponseFromRequest(req, 481, "No Dialog", nil))
			return
		}
		p.byes <- req
	})
	srv.OnNotify(func(req *sip.Request, tx sip.ServerTransaction) {
		_ = tx.Respond(sip.NewResponseFromRequest(req, 200, "OK", nil))
		p.notifies <- req
	})
	srv.OnOptions(func(req *sip.Request, tx sip.ServerTransaction) {
		_ = tx.Respond(sip.NewResponseFromRequest(req, 200, "OK", nil))
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.ServeUDP(conn)
	}()
	t.Cleanup(func() {
		ua.Close()
		conn.Close()
		<-done
	})
	// ServeUDP registers the socket with sipgo from its own goroutine; a
	// request pinned to it before then fails. Wait (bounded) for that.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if c, err := ua.TransportLayer().GetConnection("udp", p.addr); err == nil && c != nil {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatal("phone listener never registered")
		}
		time.Sleep(time.Millisecond)
	}
}

func (p *sipgoPhone) aor(box string) (sip.Uri, string) {
	host, port, _ := sip.ParseAddr(box)
	return sip.Uri{Scheme: "sip", Host: host, Port: port}, "bench.local"
}

// register registers the phone's contact at the box (digest).
func (p *sipgoPhone) register(ctx context.Context, box string) {
	p.t.Helper()
	ruri, domain := p.aor(box)
	req := sip.NewRequest(sip.REGISTER, ruri)
	req.AppendHeader(&sip.FromHeader{Address: sip.Uri{Scheme: "sip", User: p.user, Host: domain}, Params: sip.HeaderParams{{K: "tag", V: sip.GenerateTagN(8)}}})
	req.AppendHeader(&sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: p.user, Host: domain}})
	host, port, _ := sip.ParseAddr(p.addr)
	req.AppendHeader(&sip.ContactHeader{Address: sip.Uri{Scheme: "sip", User: p.user, Host: host, Port: port}})
	req.AppendHeader(sip.NewHeader("Expires", "3600"))
	res, err := p.cli.Do(ctx, req)
	if err == nil && res.StatusCode == 401 {
		res, err = p.cli.DoDigestAuth(ctx, req, res, sipgo.DigestAuth{Username: p.user, Password: p.pw})
	}
	if err != nil || res.StatusCode != 200 {
		p.t.Fatalf("%s: REGISTER: %v %v", p.user, res, err)
	}
}

// call places an authenticated call to number through the box and ACKs it.
func (p *sipgoPhone) call(ctx context.Context, box, number string) *sipgo.DialogClientSession {
	p.t.Helper()
	ruri, domain := p.aor(box)
	ruri.User = number
	req := sip.NewRequest(sip.INVITE, ruri)
	req.AppendHeader(&sip.FromHeader{Address: sip.Uri{Scheme: "sip", User: p.user, Host: domain}, Params: sip.HeaderParams{{K: "tag", V: sip.GenerateTagN(8)}}})
	req.AppendHeader(&sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: number, Host: domain}})
	req.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
	req.SetBody([]byte("v=0\r\no=- 7 7 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 40008 RTP/AVP 0\r\n"))
	s, err := p.dcc.WriteInvite(ctx, req)
	if err != nil {
		p.t.Fatal(err)
	}
	if err := s.WaitAnswer(ctx, sipgo.AnswerOptions{Username: p.user, Password: p.pw}); err != nil {
		p.t.Fatalf("%s: call %s: %v", p.user, number, err)
	}
	if err := s.Ack(ctx); err != nil {
		p.t.Fatal(err)
	}
	return s
}

func wait[T any](t *testing.T, ch <-chan T, within time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(within):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// TestAttendedTransferE2E: user0000 (SIPp) calls user0001 (a sipgo
// phone), which calls user0002 (SIPp) and then REFERs user0000 to user0002
// with Replaces naming that second call. The box bridges user0000 and
// user0002 (both scenarios check the re-INVITE carrying the other's
// session), NOTIFYs 200 and hangs up both of user0001's calls.
func TestAttendedTransferE2E(t *testing.T) {
	needSIPp(t)
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), localDoc(nil)))
	udp := d.listener("udp")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	target := sippPhone(t, udp, "user0002", "pw0002", "uas_reinvited.xml", "")
	x := newSipgoPhone(t, "user0001", "pw0001")
	x.register(ctx, udp)

	callerDone := make(chan error, 1)
	var callerOut string
	go func() {
		caller := writeCSV(t, "user0000;[authentication username=user0000 password=pw0000];0;user0001")
		out, err := sipp(t, "uac_transferee.xml", udp, caller, 1, 1)
		callerOut = out
		callerDone <- err
	}()
	d1 := wait(t, x.answered, 20*time.Second, "the call from user0000")
	consult := x.call(ctx, udp, "user0002")

	// Refer-To: <sip:user0002@box?Replaces=call-id%3Bto-tag%3D...%3Bfrom-tag%3D...> (RFC 3891 §5).
	fromTag, _ := consult.InviteRequest.From().Params.Get("tag")
	toTag, _ := consult.InviteResponse.To().Params.Get("tag")
	esc := strings.NewReplacer("%", "%25", ";", "%3B", "=", "%3D", "@", "%40", "?", "%3F", "&", "%26")
	rep := esc.Replace(consult.InviteRequest.CallID().Value() + ";to-tag=" + toTag + ";from-tag=" + fromTag)
	refer := sip.NewRequest(sip.REFER, *d1.InviteRequest.Contact().Address.Clone())
	refer.AppendHeader(sip.NewHeader("Refer-To", "<sip:user0002@"+udp+"?Replaces="+rep+">"))
	refer.AppendHeader(sip.NewHeader("Referred-By", "<sip:user0001@bench.local>"))
	res, err := d1.Do(ctx, refer)
	if err != nil || res.StatusCode != 202 {
		t.Fatalf("REFER: %v %v", res, err)
	}
	for i, want := range []string{"SIP/2.0 100 Trying", "SIP/2.0 200 OK"} {
		n := wait(t, x.notifies, 20*time.Second, fmt.Sprintf("NOTIFY %d", i+1))
		if got := strings.TrimSpace(string(n.Body())); got != want {
			t.Errorf("NOTIFY %d says %q, want %q", i+1, got, want)
		}
	}
	for i := range 2 {
		wait(t, x.byes, 20*time.Second, fmt.Sprintf("BYE %d at the transferor", i+1))
	}
	if err := wait(t, callerDone, 60*time.Second, "the transferee's scenario"); err != nil {
		t.Fatalf("transferee: %v\n%s", err, tail(callerOut, 3000))
	}
	target()
	if calls, err := d.api.Calls(t.Context()); err != nil || len(calls) != 0 {
		t.Fatalf("calls after hang-up: %v %+v", err, calls)
	}
	d.stop()
}

// TestVoicemailForwardE2E: user0001 has voicemail and never answers; after
// the ring time the box CANCELs it and forwards the call to the pilot
// 5000, which the dial plan routes to the PSTN gateway (a SIPp at
// 127.0.0.77). The pilot's scenario checks the Request-URI and the
// Diversion header naming user0001 with reason=no-answer; the caller's
// checks the 181.
func TestVoicemailForwardE2E(t *testing.T) {
	needSIPp(t)
	const gw = "127.0.0.77"
	doc := benchDoc(3, loopbackListen, func(m map[string]any) {
		m["users"].([]map[string]any)[1]["voicemail"] = "hq" // the pilot in every mode (true, fallback, would be the box outside normal mode)
		m["hq"] = map[string]any{"voicemail_pilot": "5000"}
		m["pstn"] = map[string]any{"gateways": []map[string]any{{"name": "fxo", "target": gw + ":5060"}}}
		m["dialplan"] = []map[string]any{
			{"name": "local", "match": `^user\d{4}$`, "route": "local"},
			{"name": "voicemail", "match": `^5000$`, "route": "pstn"},
		}
	})
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	udp := d.listener("udp")
	callee := sippPhone(t, udp, "user0001", "pw0001", "uas_ring.xml", "")
	pilot := sippUAS(t, "uas_voicemail.xml", gw, "5060", "")
	caller := writeCSV(t, "user0000;[authentication username=user0000 password=pw0000];0;user0001")
	if out, err := sipp(t, "uac_forwarded.xml", udp, caller, 1, 1); err != nil {
		t.Fatalf("caller: %v\n%s", err, tail(out, 3000))
	}
	callee()
	pilot()
	d.stop()
}
