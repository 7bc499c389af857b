package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outpost/outpost/gateway/trace"
	"github.com/outpost/outpost/gateway/trace/tracetest"
)

func rawRegister(transport string, local netip.AddrPort, callID string) string {
	return fmt.Sprintf("REGISTER sip:bench.local SIP/2.0\r\nVia: SIP/2.0/%s %s;branch=z9hG4bK-%s;rport\r\nMax-Forwards: 70\r\n"+
		"From: <sip:user0000@bench.local>;tag=t%s\r\nTo: <sip:user0000@bench.local>\r\nCall-ID: %s\r\nCSeq: 1 REGISTER\r\n"+
		"Contact: <sip:user0000@%s;transport=%s>\r\nContent-Length: 0\r\n\r\n",
		strings.ToUpper(transport), local, callID, callID, callID, local, transport)
}

// TestTraceAndHEP: a real daemon with a HEP capture server configured; a
// phone registers over UDP and TCP (raw REGISTERs, answered 401) while
// `outpostctl trace --pcap` runs. The pcap file, read back, holds the
// REGISTERs and the 401s with the phone's and the box's addresses, and the
// HEP server received them with the node id, auth key and Call-ID.
func TestTraceAndHEP(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: end-to-end test")
	}
	hep, err := tracetest.NewHEPServer()
	if err != nil {
		t.Fatal(err)
	}
	defer hep.Close()
	cfg := writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), benchDoc(1, loopbackListen, func(d map[string]any) {
		d["capture"] = map[string]any{"hep_server": "udp:" + hep.UDP.LocalAddr().String(), "node_id": 2001, "password": "hep-key"}
	}))
	d := startDaemon(t, t.TempDir(), cfg)
	boxUDP := netip.MustParseAddrPort(d.listener("udp"))
	boxTCP := netip.MustParseAddrPort(d.listener("tcp"))

	pcapFile := filepath.Join(t.TempDir(), "trace.pcap")
	cmd := exec.Command(filepath.Join(binaries(t), "outpostctl"), "--socket", filepath.Join(d.dir, "outpostd.sock"),
		"trace", "--filter", "user=user0000", "--pcap", pcapFile)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
	}()

	pc, _ := udpPeer(t)
	phone := pc.LocalAddr().(*net.UDPAddr).AddrPort()
	register := func(id string) {
		t.Helper()
		if _, err := pc.WriteTo([]byte(rawRegister("udp", phone, id)), net.UDPAddrFromAddrPort(boxUDP)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 65536)
		pc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, _, err := pc.ReadFrom(buf); err != nil || !bytes.HasPrefix(buf[:n], []byte("SIP/2.0 401")) {
			t.Fatalf("REGISTER %s: %v %q", id, err, buf[:n])
		}
	}
	// The trace has subscribed once the pcap file holds a record.
	for i := 0; ; i++ {
		register(fmt.Sprintf("warmup-%d", i))
		if fi, err := os.Stat(pcapFile); err == nil && fi.Size() > 24 {
			break
		}
		if i == 50 {
			t.Fatalf("outpostctl trace wrote nothing: %s", stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	register("trace-udp")

	tc, err := net.Dial("tcp", boxTCP.String())
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	tcpPhone := tc.LocalAddr().(*net.TCPAddr).AddrPort()
	if _, err := tc.Write([]byte(rawRegister("tcp", tcpPhone, "trace-tcp"))); err != nil {
		t.Fatal(err)
	}
	tc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := bufio.NewReader(tc).ReadString('\n'); err != nil || !strings.HasPrefix(line, "SIP/2.0 401") {
		t.Fatalf("TCP REGISTER: %v %q", err, line)
	}

	type want struct {
		proto, callID, start string
		src, dst             netip.AddrPort
	}
	wants := []want{
		{"udp", "trace-udp", "REGISTER ", phone, boxUDP},
		{"udp", "trace-udp", "SIP/2.0 401", boxUDP, phone},
		{"tcp", "trace-tcp", "REGISTER ", tcpPhone, boxTCP},
		{"tcp", "trace-tcp", "SIP/2.0 401", boxTCP, tcpPhone},
	}
	found := func(ps []tracetest.Packet, w want) bool {
		for _, p := range ps {
			if p.Proto == w.proto && p.Src == w.src && p.Dst == w.dst && bytes.HasPrefix(p.Payload, []byte(w.start)) &&
				string(trace.Header(p.Payload, "call-id", "i")) == w.callID {
				return true
			}
		}
		return false
	}
	var ps []tracetest.Packet
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		f, err := os.Open(pcapFile)
		if err != nil {
			t.Fatal(err)
		}
		ps, err = tracetest.ReadPcap(f)
		f.Close()
		if err != nil {
			t.Fatalf("reading the pcap back: %v", err)
		}
		all := true
		for _, w := range wants {
			all = all && found(ps, w)
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			for _, p := range ps {
				t.Logf("%s %s -> %s %q", p.Proto, p.Src, p.Dst, bytes.SplitN(p.Payload, []byte("\r\n"), 2)[0])
			}
			t.Fatalf("the pcap file lacks some of %+v", wants)
		}
	}
	// Ctrl-C ends the trace cleanly.
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("outpostctl trace: %v\n%s", err, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("outpostctl trace did not end on SIGINT")
	}
	if !strings.Contains(stderr.String(), "messages written to") {
		t.Errorf("stderr: %s", stderr.String())
	}

	// HEP: every message since the start, the node id, auth key and Call-ID.
	seen := map[string]bool{}
	for deadline := time.After(5 * time.Second); len(seen) < len(wants); {
		select {
		case h := <-hep.C:
			src, dst := h.Addrs()
			proto := map[uint32]string{17: "udp", 6: "tcp"}[h.Uint(2)]
			for _, w := range wants {
				if proto == w.proto && src == w.src && dst == w.dst && string(h[0x11]) == w.callID && bytes.HasPrefix(h[0x0f], []byte(w.start)) {
					if h.Uint(12) != 2001 || string(h[0x0e]) != "hep-key" || h.Uint(0x0b) != 1 || h.Uint(1) != 2 {
						t.Errorf("HEP chunks of %s %s: %v", w.callID, w.start, h)
					}
					seen[w.callID+w.start] = true
				}
			}
		case <-deadline:
			t.Fatalf("HEP server saw only %v of %+v", seen, wants)
		}
	}
	if errs := hep.Errors(); len(errs) > 0 {
		t.Fatalf("undecodable HEP packets: %v", errs)
	}

	// A bad filter is refused before anything streams.
	if out, err := d.ctl("trace", "--filter", "colour=blue"); err == nil || !strings.Contains(out, "filter") {
		t.Errorf("bad filter: %v %s", err, out)
	}
}
