package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestLocalCallWithSIPp: user0001 registers from a SIPp phone, user0000
// calls it through the box (authenticating with 407), the call is
// answered, ACKed and hung up; both SIPp runs must succeed.
func TestLocalCallWithSIPp(t *testing.T) {
	needSIPp(t)
	doc := benchDoc(3, loopbackListen, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^user\d{4}$`, "route": "local"}}
	})
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	udp := d.listener("udp")

	// The callee's port: registered by one SIPp run, answered by the next.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	calleePort := strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port)
	pc.Close()
	callee := filepath.Join(t.TempDir(), "callee.csv")
	if err := os.WriteFile(callee, []byte("SEQUENTIAL\nuser0001;[authentication username=user0001 password=pw0001];3600\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := sipp(t, "reg_auth.xml", udp, callee, 1, 10, "-p", calleePort); err != nil {
		t.Fatalf("callee registration: %v\n%s", err, tail(out, 2000))
	}

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	sf, _ := filepath.Abs("testdata/sipp/uas_answer.xml")
	uas := exec.CommandContext(ctx, "sipp", "-sf", sf, "-i", "127.0.0.1", "-p", calleePort, "-m", "1",
		"-nostdin", "-timeout", "50", "-timeout_error")
	uas.Dir = t.TempDir()
	var uasOut syncBuffer
	uas.Stdout, uas.Stderr = &uasOut, &uasOut
	if err := uas.Start(); err != nil {
		t.Fatal(err)
	}
	uasDone := make(chan error, 1)
	go func() { uasDone <- uas.Wait() }()

	caller := filepath.Join(t.TempDir(), "caller.csv")
	if err := os.WriteFile(caller, []byte("SEQUENTIAL\nuser0000;[authentication username=user0000 password=pw0000];0;user0001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := sipp(t, "uac_call.xml", udp, caller, 1, 1)
	if err != nil {
		t.Fatalf("caller: %v\n%s\n--- callee ---\n%s", err, tail(out, 3000), tail(uasOut.String(), 2000))
	}
	// The call is over on both sides: none is left in progress.
	if calls, err := d.api.Calls(t.Context()); err != nil || len(calls) != 0 {
		t.Fatalf("calls after hang-up: %v %+v", err, calls)
	}
	select {
	case err := <-uasDone:
		if err != nil {
			t.Fatalf("callee SIPp: %v\n%s", err, tail(uasOut.String(), 3000))
		}
	case <-ctx.Done():
		t.Fatal("callee SIPp did not finish")
	}
	d.stop()
}
