package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/appliance/api"
)

// TestDrainOnSIGTERM: a call is up when outpostd gets SIGTERM. The box
// drains: status says so, a new INVITE is refused with 503 and a
// Retry-After, the call in progress goes on to its BYE, and only then does
// outpostd exit, cleanly.
func TestDrainOnSIGTERM(t *testing.T) {
	needSIPp(t)
	doc := benchDoc(3, loopbackListen, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^user\d{4}$`, "route": "local"}}
		m["sip"].(map[string]any)["drain_s"] = 30
	})
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	udp := d.listener("udp")
	answered := answeringPhone(t, udp, "user0001", "pw0001")

	caller := filepath.Join(t.TempDir(), "caller.csv")
	if err := os.WriteFile(caller, []byte("SEQUENTIAL\nuser0000;[authentication username=user0000 password=pw0000];0;user0001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	callDone := make(chan error, 1)
	var callOut string
	go func() {
		out, err := sipp(t, "uac_call_long.xml", udp, caller, 1, 1, "-d", "8000")
		callOut = out
		callDone <- err
	}()
	d.waitFor("the call answered", 10*time.Second, func(s api.Status) bool { return s.CallsActive == 1 })

	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d.waitFor("draining", 5*time.Second, func(s api.Status) bool { return s.Draining })

	p := newSipgoPhone(t, "user0002", "pw0002")
	ruri, domain := p.aor(udp)
	ruri.User = "user0001"
	req := sip.NewRequest(sip.INVITE, ruri)
	req.AppendHeader(&sip.FromHeader{Address: sip.Uri{Scheme: "sip", User: "user0002", Host: domain}, Params: sip.HeaderParams{{K: "tag", V: sip.GenerateTagN(8)}}})
	req.AppendHeader(&sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: "user0001", Host: domain}})
	req.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
	req.SetBody([]byte("v=0\r\no=- 7 7 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 40008 RTP/AVP 0\r\n"))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := p.dcc.WriteInvite(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	err = s.WaitAnswer(ctx, sipgo.AnswerOptions{Username: "user0002", Password: "pw0002"})
	var de *sipgo.ErrDialogResponse
	if !errors.As(err, &de) || de.Res.StatusCode != 503 || de.Res.GetHeader("Retry-After") == nil {
		t.Fatalf("a new call while draining: %v; want 503 with Retry-After", err)
	}
	d.alive()

	if err := <-callDone; err != nil {
		t.Fatalf("the call in progress did not complete during the drain: %v\n%s", err, tail(callOut, 3000))
	}
	answered()
	select {
	case err := <-d.done:
		if err != nil {
			t.Fatalf("outpostd exit after the drain: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("outpostd did not stop within 20 s of its last call ending")
	}
	if log := d.log.String(); !strings.Contains(log, "drained: no call in progress") {
		t.Errorf("the log does not say the drain completed:\n%s", tail(log, 3000))
	}
}
