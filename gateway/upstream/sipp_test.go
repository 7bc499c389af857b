package upstream

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/outpost/outpost/internal/testenv"
)

// freePorts returns n distinct free UDP ports on loopback for SIPp, which
// cannot bind port 0 and report it. The sockets are held until all n are
// chosen, then released for SIPp.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var ports []string
	for range n {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ports = append(ports, strconv.Itoa(c.LocalAddr().(*net.UDPAddr).Port))
	}
	return ports
}

// TestSIPpRegistrar registers against SIPp as the HQ registrar: an
// independent digest implementation (SIPp's verifyauth) checks the box's
// answer to a qop=auth challenge, and the scenario checks the Contact.
func TestSIPpRegistrar(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: test against SIPp (make test runs it)")
	}
	sipp := testenv.NeedTool(t, "sipp")
	template, err := os.ReadFile("testdata/hq_registrar.xml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		password string
		exit     int // SIPp: 0 all calls succeeded, 1 some failed
		state    State
		code     int
	}{
		{"right password", trunkPass, 0, StateRegistered, 200},
		{"wrong password", "wrong", 1, StateFailed, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := freePorts(t, 2)
			hqAddr := "127.0.0.1:" + p[0]
			a, boxAddr := startBox(t, Config{Trunk: Static{"udp:" + hqAddr}, Timeout: 10 * time.Second,
				Username: trunkUser, Password: tc.password})

			dir := t.TempDir()
			inj := filepath.Join(dir, "hq.csv")
			if err := os.WriteFile(inj, []byte("SEQUENTIAL\n"+trunkUser+";"+trunkPass+";\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			scenario := filepath.Join(dir, "hq_registrar.xml")
			xml := bytes.ReplaceAll(template, []byte("BOX_ADDR"), []byte(regexp.QuoteMeta(boxAddr)))
			if err := os.WriteFile(scenario, xml, 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, sipp, "-sf", scenario, "-inf", inj,
				// No -mp: SIPp binds that port and the three above it
				// exactly (a taken one fails the run); left alone it
				// searches for free ones.
				"-i", "127.0.0.1", "-p", p[0], "-ci", "127.0.0.1", "-cp", p[1], "-mi", "127.0.0.1",
				"-m", "1", "-nostdin", "-timeout", "20s", "-timeout_error",
				"-trace_err", "-error_file", filepath.Join(dir, "errors.log"))
			cmd.Dir = dir
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// SIPp may not listen yet: the UDP retransmissions of the
			// REGISTER (Timer A) cover its start-up within Timeout.
			a.Set("1001")
			err := cmd.Wait()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.exit {
				errs, _ := os.ReadFile(filepath.Join(dir, "errors.log"))
				t.Fatalf("sipp exit %d, want %d\n%s\n%s", code, tc.exit, out.Bytes(), errs)
			}
			st := settled(t, a, func(e Entry) bool { return e.State != StateRegistering && e.State != StatePending })
			if e := st[0]; e.State != tc.state || e.Code != tc.code {
				t.Fatalf("status %+v, want %s %d", e, tc.state, tc.code)
			}
		})
	}
}
