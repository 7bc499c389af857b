package main

import (
	"bufio"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSyslogE2E: with --syslog tcp://…, the daemon's records reach the
// collector as octet-counted RFC 5424 messages, from the first record to
// "outpostd stopped" (flushed on exit), and stderr keeps its log too.
func TestSyslogE2E(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	msgs := make(chan string, 1024)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			n, err := br.ReadString(' ')
			if err != nil {
				close(msgs)
				return
			}
			size, _ := strconv.Atoi(strings.TrimSpace(n))
			b := make([]byte, size)
			if _, err := io.ReadFull(br, b); err != nil {
				close(msgs)
				return
			}
			msgs <- string(b)
		}
	}()
	tmp := t.TempDir()
	cfg := writeJSON(t, filepath.Join(tmp, "v1.json"), benchDoc(1, loopbackListen, nil))
	d := startDaemonArgs(t, "", t.TempDir(), "--config", cfg, "--syslog", "tcp://"+l.Addr().String(), "--syslog-facility", "daemon")
	pid := strconv.Itoa(d.cmd.Process.Pid)
	d.stop()
	if !strings.Contains(d.log.String(), "outpostd running") {
		t.Errorf("stderr lost its log:\n%s", d.log.String())
	}
	var running, stopped bool
	timeout := time.After(10 * time.Second)
	for !stopped {
		select {
		case m, ok := <-msgs:
			if !ok {
				t.Fatalf("collector connection ended before \"outpostd stopped\" (running seen: %v)", running)
			}
			// <PRI>1 TIMESTAMP HOSTNAME outpostd PID MSGID SD MSG; daemon = 3.
			f := strings.SplitN(m, " ", 7)
			if len(f) < 7 || !strings.HasPrefix(f[0], "<") || !strings.HasSuffix(f[0], ">1") || f[3] != "outpostd" || f[4] != pid {
				t.Fatalf("not an RFC 5424 message of outpostd %s: %q", pid, m)
			}
			if pri, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(f[0], "<"), ">1")); pri/8 != 3 {
				t.Errorf("facility %d, want daemon (3): %q", pri/8, m)
			}
			running = running || strings.Contains(m, "] outpostd running")
			stopped = strings.HasSuffix(m, "outpostd stopped")
		case <-timeout:
			t.Fatalf("no \"outpostd stopped\" at the collector (running seen: %v)", running)
		}
	}
	if !running {
		t.Error("\"outpostd running\" never reached the collector")
	}
}
