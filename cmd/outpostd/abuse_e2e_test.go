package main

// Abuse from unauthenticated sources, against the real daemon: INVITEs
// without credentials are answered statelessly (one 407, no transaction,
// no retransmissions to a claimed source), and garbage does not flood the
// log.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// unauthInvite is an out-of-dialog INVITE from user0000 with no
// credentials, sent from port.
func unauthInvite(port int, id string) string {
	return "INVITE sip:user0001@127.0.0.1 SIP/2.0\r\n" +
		"Via: SIP/2.0/UDP 127.0.0.1:" + strconv.Itoa(port) + ";branch=z9hG4bK-" + id + "\r\n" +
		"Max-Forwards: 70\r\nFrom: <sip:user0000@bench.local>;tag=f" + id + "\r\nTo: <sip:user0001@bench.local>\r\n" +
		"Call-ID: " + id + "\r\nCSeq: 1 INVITE\r\nContact: <sip:user0000@127.0.0.1:" + strconv.Itoa(port) + ">\r\n" +
		"Content-Length: 0\r\n\r\n"
}

func udpPeer(t *testing.T) (net.PacketConn, int) {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, c.LocalAddr().(*net.UDPAddr).Port
}

// TestUnauthenticatedInviteGetsOne407: an INVITE without credentials that
// is never ACKed gets exactly one 407 (RFC 3261 §8.2.7: stateless, not
// retransmitted; the client's own retransmissions get it again), not a
// server transaction's retransmissions for 32 s to whatever address the
// packet claimed.
func TestUnauthenticatedInviteGetsOne407(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: end-to-end test")
	}
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), benchDoc(2, loopbackListen, nil)))
	dst, _ := net.ResolveUDPAddr("udp", d.listener("udp"))
	c, port := udpPeer(t)
	if _, err := c.WriteTo([]byte(unauthInvite(port, "one407")), dst); err != nil {
		t.Fatal(err)
	}
	// The thing tested is what arrives in a window: read for 5 s.
	deadline := time.Now().Add(5 * time.Second)
	c.SetReadDeadline(deadline)
	var finals []string
	buf := make([]byte, 65536)
	for {
		n, _, err := c.ReadFrom(buf)
		if err != nil {
			break
		}
		line, _, _ := strings.Cut(string(buf[:n]), "\r\n")
		if !strings.HasPrefix(line, "SIP/2.0 1") {
			finals = append(finals, line)
		}
	}
	if len(finals) != 1 || !strings.HasPrefix(finals[0], "SIP/2.0 407") {
		t.Fatalf("responses within 5 s: %q, want exactly one 407", finals)
	}
	d.alive()
	d.stop()
}

// TestUnauthenticatedInviteFloodLeavesNoState: 10,000 INVITEs without
// credentials in 10 s leave the daemon's goroutines and live heap at their
// baseline within 5 s: no transaction is kept for them.
func TestUnauthenticatedInviteFloodLeavesNoState(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: end-to-end test")
	}
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), benchDoc(2, loopbackListen, nil)))
	dst, _ := net.ResolveUDPAddr("udp", d.listener("udp"))
	g0, h0 := d.liveState()
	t.Logf("baseline: %d goroutines, %.1f MiB heap in use", g0, h0/(1<<20))

	const total, senders = 10000, 4
	peers := make([]net.PacketConn, senders)
	ports := make([]int, senders)
	for i := range peers {
		peers[i], ports[i] = udpPeer(t)
		go io.Copy(io.Discard, readerOf(peers[i])) // drain the answers; ends when the socket closes
	}
	start := time.Now()
	for i := range total {
		p := i % senders
		if _, err := peers[p].WriteTo([]byte(unauthInvite(ports[p], fmt.Sprintf("flood%d", i))), dst); err != nil {
			t.Fatal(err)
		}
		// Spread the flood over 10 s: 100 every 100 ms.
		if i%100 == 99 {
			if wait := time.Until(start.Add(time.Duration(i+1) * time.Millisecond)); wait > 0 {
				time.Sleep(wait)
			}
		}
	}
	t.Logf("sent %d INVITEs in %s", total, time.Since(start).Round(time.Millisecond))
	deadline := time.Now().Add(5 * time.Second)
	for {
		g, h := d.liveState()
		if g <= g0+20 && h <= h0+16<<20 {
			t.Logf("after the flood: %d goroutines, %.1f MiB heap in use", g, h/(1<<20))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the flood: %d goroutines (baseline %d), %.1f MiB heap in use (baseline %.1f)", g, g0, h/(1<<20), h0/(1<<20))
		}
		time.Sleep(250 * time.Millisecond)
	}
	d.alive()
	d.stop()
}

// readerOf reads datagrams from c until it is closed.
func readerOf(c net.PacketConn) io.Reader {
	return readerFunc(func(p []byte) (int, error) {
		n, _, err := c.ReadFrom(p)
		return n, err
	})
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// liveState forces a collection (pprof's heap?gc=1 on the admin socket)
// and reads the goroutine count and the heap in use from /metrics.
func (d *daemon) liveState() (goroutines int, heapInUse float64) {
	d.t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(d.dir, "outpostd.sock"))
	}}}
	res, err := hc.Get("http://outpostd/debug/pprof/heap?gc=1")
	if err != nil {
		d.t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	body, _ := d.metrics()
	g, h := metricValue(body, "go_goroutines"), metricValue(body, "go_memstats_heap_inuse_bytes")
	if g < 0 || h < 0 {
		d.t.Fatalf("/metrics lacks go_goroutines or go_memstats_heap_inuse_bytes")
	}
	return int(g), h
}

// metricValue is the value of an unlabelled metric in Prometheus text, -1
// when absent.
func metricValue(body, name string) float64 {
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// TestGarbageFloodDoesNotFloodTheLog: 100,000 garbage datagrams (random
// bytes, truncated SIP, broken headers) add fewer than 100 lines to the
// log, and the daemon still answers an OPTIONS afterwards.
func TestGarbageFloodDoesNotFloodTheLog(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: end-to-end test")
	}
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), benchDoc(2, loopbackListen, nil)))
	dst, _ := net.ResolveUDPAddr("udp", d.listener("udp"))
	lines0 := strings.Count(d.log.String(), "\n")

	rnd := rand.New(rand.NewPCG(1, 2))
	methods := []string{"INVITE", "BYE", "REGISTER", "OPTIONS", "NOTIFY", "FOO", "SUBSCRIBE", "ACK", "CANCEL", "INFO"}
	full := func(m string, i int) string {
		return m + " sip:user0001@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5099;branch=z9hG4bK-g" + strconv.Itoa(i) +
			"\r\nFrom: <sip:user0000@bench.local>;tag=g" + strconv.Itoa(i) + "\r\nTo: <sip:user0001@bench.local>\r\nCall-ID: g" +
			strconv.Itoa(i) + "\r\nCSeq: 1 " + m + "\r\nContent-Length: 0\r\n\r\n"
	}
	garbage := func(i int) []byte {
		m := methods[rnd.IntN(len(methods))]
		switch i % 5 {
		case 0: // random bytes
			b := make([]byte, 1+rnd.IntN(300))
			for j := range b {
				b[j] = byte(rnd.UintN(256))
			}
			return b
		case 1: // truncated SIP
			s := full(m, i)
			return []byte(s[:len(m)+1+rnd.IntN(len(s)-len(m)-1)])
		case 2: // an invalid header
			return []byte(m + " sip:x@127.0.0.1 SIP/2.0\r\nVia: \x00\xff" + strconv.Itoa(i) + "\r\nCSeq: x\r\nTo: <<<\r\n\r\n")
		case 3: // a bad request line
			return []byte(m + " " + strings.Repeat("\x01<sip:", 1+rnd.IntN(5)) + "\r\nCall-ID: " + strconv.Itoa(i) + "\r\n\r\n")
		default: // missing mandatory headers
			return []byte(m + " sip:x@127.0.0.1 SIP/2.0\r\nFrom: <sip:a@b>;tag=" + strconv.Itoa(i) + "\r\nContent-Length: 0\r\n\r\n")
		}
	}
	c, port := udpPeer(t)
	const total = 100000
	start := time.Now()
	for i := range total {
		if _, err := c.WriteTo(garbage(i), dst); err != nil {
			t.Fatal(err)
		}
		// Paced at about 20,000/s so most of it reaches the daemon
		// rather than overflowing its socket buffer.
		if i%200 == 199 {
			if wait := time.Until(start.Add(time.Duration(i+1) * 50 * time.Microsecond)); wait > 0 {
				time.Sleep(wait)
			}
		}
		if time.Since(start) > 60*time.Second {
			t.Fatalf("sending took over 60 s (%d sent)", i)
		}
	}
	t.Logf("sent %d garbage datagrams in %s", total, time.Since(start).Round(time.Millisecond))

	// Still serving: an OPTIONS is answered 200 (retried, bounded, since
	// the flood may still be queued ahead of it).
	opts := "OPTIONS sip:127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:" + strconv.Itoa(port) + ";branch=z9hG4bK-after\r\n" +
		"Max-Forwards: 70\r\nFrom: <sip:probe@127.0.0.1>;tag=1\r\nTo: <sip:127.0.0.1>\r\nCall-ID: after-flood\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n"
	answered := false
	buf := make([]byte, 65536)
	for try := 0; try < 10 && !answered; try++ {
		if _, err := c.WriteTo([]byte(opts), dst); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		for {
			n, _, err := c.ReadFrom(buf)
			if err != nil {
				break
			}
			if msg := string(buf[:n]); strings.Contains(msg, "after-flood") && strings.HasPrefix(msg, "SIP/2.0 200") {
				answered = true
				break
			}
		}
	}
	if !answered {
		t.Fatal("no 200 to an OPTIONS after the flood")
	}
	d.alive()
	logText := d.log.String()
	grown := strings.Count(logText, "\n") - lines0
	t.Logf("log grew by %d lines (%d bytes in all):\n%s", grown, len(logText), tail(logText, 2000))
	if grown >= 100 {
		t.Fatalf("log grew by %d lines, want < 100; last lines:\n%s", grown, tail(logText, 4000))
	}
	body, _ := d.metrics()
	var drops []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "outpost_sip_dropped_total{") {
			drops = append(drops, l)
		}
	}
	if len(drops) == 0 {
		t.Errorf("/metrics has no outpost_sip_dropped_total by kind")
	}
	t.Logf("dropped:\n%s", strings.Join(drops, "\n"))
	d.stop()
}
