package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outpost/outpost/appliance/pki"
)

// labPKI makes a CA, a box certificate for 127.0.0.1 and an HQ client
// certificate with the same code outpostctl pki uses.
type labPKI struct{ dir, caPEM, boxCert, boxKey, hqCert, hqKey string }

func newLabPKI(t *testing.T, name string) labPKI {
	t.Helper()
	dir := t.TempDir()
	if err := pki.InitCA(dir, name, 1); err != nil {
		t.Fatal(err)
	}
	boxCert, boxKey, err := pki.Issue(dir, dir, "box", pki.Server, []string{"127.0.0.1"}, 30)
	if err != nil {
		t.Fatal(err)
	}
	hqCert, hqKey, err := pki.Issue(dir, dir, "hq", pki.Client, nil, 30)
	if err != nil {
		t.Fatal(err)
	}
	return labPKI{dir: dir, caPEM: filepath.Join(dir, pki.CACertFile), boxCert: boxCert, boxKey: boxKey, hqCert: hqCert, hqKey: hqKey}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (p labPKI) management(t *testing.T, listen string) map[string]any {
	return map[string]any{"listen": listen, "cert_pem": readFile(t, p.boxCert), "key_pem": readFile(t, p.boxKey), "client_ca_pem": readFile(t, p.caPEM)}
}

// TestManagementOverMutualTLS: HQ manages the box over HTTPS with a client
// certificate from its CA; no certificate, or one from another CA, is
// refused at the handshake; a push that breaks the management listener is
// refused whole and the box keeps its running version.
func TestManagementOverMutualTLS(t *testing.T) {
	hq := newLabPKI(t, "HQ lab CA")
	other := newLabPKI(t, "Someone else")
	tmp := t.TempDir()
	doc := benchDoc(3, loopbackListen, func(m map[string]any) { m["management"] = hq.management(t, "127.0.0.1:0") })
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(tmp, "v1.json"), doc))
	addr := d.status().Management
	if addr == "" {
		t.Fatal("no management listener in status")
	}
	remote := func(p labPKI, args ...string) (string, error) {
		return d.ctl(append([]string{"--server", "https://" + addr, "--cert", p.hqCert, "--key", p.hqKey, "--ca", hq.caPEM}, args...)...)
	}
	if out, err := remote(hq, "status"); err != nil || !strings.Contains(out, "config") {
		t.Fatalf("remote status: %v\n%s", err, out)
	}
	// A push over HTTPS, with If-Match.
	doc["site"].(map[string]any)["name"] = "pushed-by-hq"
	if out, err := remote(hq, "config", "apply", writeJSON(t, filepath.Join(tmp, "v2.json"), doc), "--if-match", "1"); err != nil || !strings.Contains(out, "version 2") {
		t.Fatalf("remote apply: %v\n%s", err, out)
	}
	// Another CA's client certificate: refused.
	if out, err := remote(other, "status"); err == nil {
		t.Fatalf("a client certificate from another CA was accepted:\n%s", out)
	}
	// No client certificate at all: refused at the handshake.
	plain := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if res, err := plain.Get("https://" + addr + "/api/v1/status"); err == nil {
		res.Body.Close()
		t.Fatalf("no client certificate: got HTTP %d", res.StatusCode)
	}
	// Moving the listener onto the SIP TCP port fails to bind: the push is
	// refused and version 2 keeps running, management included.
	sipTCP := d.listener("tcp")
	doc["management"] = hq.management(t, sipTCP)
	doc["site"].(map[string]any)["name"] = "never"
	out, err := remote(hq, "config", "apply", writeJSON(t, filepath.Join(tmp, "v3.json"), doc))
	if err == nil || !strings.Contains(out, "management") {
		t.Fatalf("a push with an unbindable management listener: %v\n%s", err, out)
	}
	if s := d.status(); s.ConfigVersion != 2 || s.Management != addr {
		t.Fatalf("after the refused push: version %d, management %q (want 2, %q)", s.ConfigVersion, s.Management, addr)
	}
	if out, err := remote(hq, "status"); err != nil {
		t.Fatalf("management after the refused push: %v\n%s", err, out)
	}

	// A second client certificate from the same CA, "intruder": allowed
	// until allowed_clients names only "hq", then refused with 403; then
	// hq's own serial is revoked. Neither push moves the listener.
	intruder := hq
	if intruder.hqCert, intruder.hqKey, err = pki.Issue(hq.dir, t.TempDir(), "intruder", pki.Client, nil, 30); err != nil {
		t.Fatal(err)
	}
	if out, err := remote(intruder, "status"); err != nil {
		t.Fatalf("intruder without allowed_clients (any certificate of the CA): %v\n%s", err, out)
	}
	m := hq.management(t, "127.0.0.1:0") // the listener's section as in version 2
	m["allowed_clients"] = []any{"hq"}
	doc["management"] = m
	if out, err := remote(hq, "config", "apply", writeJSON(t, filepath.Join(tmp, "v4.json"), doc)); err != nil {
		t.Fatalf("push allowed_clients: %v\n%s", err, out)
	}
	if out, err := remote(hq, "status"); err != nil {
		t.Fatalf("hq, allowed: %v\n%s", err, out)
	}
	if out, err := remote(intruder, "status"); err == nil || !strings.Contains(out, "403") || !strings.Contains(out, "client certificate not allowed") {
		t.Fatalf("intruder, not allowed: %v\n%s", err, out)
	}
	block, _ := pem.Decode([]byte(readFile(t, hq.hqCert)))
	hqLeaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	m["revoked_serials"] = []any{strings.ToUpper(hqLeaf.SerialNumber.Text(16))}
	if out, err := remote(hq, "config", "apply", writeJSON(t, filepath.Join(tmp, "v5.json"), doc)); err != nil {
		t.Fatalf("push revoked_serials: %v\n%s", err, out)
	}
	if out, err := remote(hq, "status"); err == nil || !strings.Contains(out, "client certificate revoked") {
		t.Fatalf("hq, revoked: %v\n%s", err, out)
	}
	if s := d.status(); s.ConfigVersion != 4 || s.Management != addr {
		t.Fatalf("after the access pushes: version %d, management %q (want 4, %q)", s.ConfigVersion, s.Management, addr)
	}
	if !strings.Contains(d.log.String(), "client certificate not allowed") {
		t.Errorf("the refusal is not logged:\n%s", d.log.String())
	}
	d.stop()
}

// TestFleetPush: one document to two real boxes and a dead address; the
// table has a result per box and the exit status says one failed.
func TestFleetPush(t *testing.T) {
	hq := newLabPKI(t, "HQ lab CA")
	tmp := t.TempDir()
	var boxes []*daemon
	var hosts []string
	for i := range 2 {
		doc := benchDoc(3, loopbackListen, func(m map[string]any) { m["management"] = hq.management(t, "127.0.0.1:0") })
		d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(tmp, fmt.Sprintf("box%d.json", i)), doc))
		boxes = append(boxes, d)
		hosts = append(hosts, d.status().Management)
	}
	hosts = append(hosts, "127.0.0.1:1") // nobody listens there
	doc := benchDoc(5, loopbackListen, func(m map[string]any) { m["management"] = hq.management(t, "127.0.0.1:0") })
	file := writeJSON(t, filepath.Join(tmp, "fleet.json"), doc)
	out, err := boxes[0].ctl("fleet", "push", file, "--hosts", strings.Join(hosts, ","), "--parallel", "2",
		"--cert", hq.hqCert, "--key", hq.hqKey, "--ca", hq.caPEM, "--timeout", "5s")
	if err == nil {
		t.Fatalf("fleet push with a dead box exited 0:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 4 || !strings.Contains(lines[1], "version 2") || !strings.Contains(lines[2], "version 2") || !strings.Contains(lines[3], "refused") {
		t.Fatalf("fleet table:\n%s", out)
	}
	for i, d := range boxes {
		// Same management section: the listener the push came through stays.
		if s := d.status(); s.ConfigVersion != 2 || s.Management != hosts[i] {
			t.Fatalf("box at version %d after the fleet push", s.ConfigVersion)
		}
		d.stop()
	}
}
