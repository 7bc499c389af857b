package main

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/internal/testenv"
)

// TestLinphoneOverTLSWithSRTP: a real softphone, Debian's linphonec
// (linphone-cli), registers over TLS verifying the box's certificate
// against the test's CA, and calls a plain-RTP phone (SIPp, echoing the
// RTP it gets) with SRTP required on its side (SDES, mandatory). The box
// terminates SRTP on the softphone's leg and relays plain RTP on the
// other: the call's legs say so (api.MediaLeg.Protection), the softphone's
// audio (a wav file played into the call) reaches the box and is relayed,
// SIPp's echo comes back through the box, and linphonec sees the call
// running until it hangs up, which ends the call on both sides.
func TestLinphoneOverTLSWithSRTP(t *testing.T) {
	needSIPp(t)
	testenv.NeedTool(t, "linphonecsh")
	caPEM, certPEM, keyPEM := linphoneCert(t)
	doc := benchDoc(2, []string{"udp:127.0.0.1:0", "tls:127.0.0.1:0"}, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^user\d{4}$`, "route": "local"}}
		m["sip"].(map[string]any)["tls"] = map[string]any{"cert_pem": certPEM, "key_pem": keyPEM}
		m["media"] = map[string]any{"srtp": "offer"}
	})
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))

	// The called phone: SIPp registered as user0000 over UDP, answering
	// with its RTP echo port.
	port := freePort(t, "127.0.0.1")
	csv := filepath.Join(t.TempDir(), "callee.csv")
	if err := os.WriteFile(csv, []byte("SEQUENTIAL\nuser0000;[authentication username=user0000 password=pw0000];3600\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := sipp(t, "reg_auth.xml", d.listener("udp"), csv, 1, 10, "-p", port); err != nil {
		t.Fatalf("callee registration: %v\n%s", err, tail(out, 2000))
	}
	// No -mp: SIPp binds that port and the three above it exactly and
	// fails when one is taken; left alone it searches for free ones.
	answered := runUAS(t, "uas_echo.xml", "127.0.0.1", port, "-aa", "-rtp_echo")

	lp := startLinphone(t, d.listener("tls"), caPEM, "user0001", "pw0001")
	lp.awaitRegistered(t, "registration over TLS")
	lp.run(t, "generic", "soundcard use files")
	lp.run(t, "dial", "sip:user0000@bench.local")
	lp.await(t, "the call's streams", 20*time.Second, func() bool {
		return strings.Contains(lp.run(t, "generic", "calls"), "StreamsRunning")
	})
	lp.run(t, "generic", "play "+toneWAV(t))

	var call api.Call
	deadline := time.Now().Add(20 * time.Second)
	for {
		calls, err := d.api.Calls(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(calls) == 1 && len(calls[0].Media) == 2 && calls[0].Media[0].Packets >= 50 && calls[0].Media[1].Packets >= 50 {
			call = calls[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("media did not flow both ways through the box: %+v\nlinphonec log:\n%s", calls, lp.logTail())
		}
		time.Sleep(200 * time.Millisecond)
	}
	a, b := call.Media[0], call.Media[1]
	if a.Protection != "srtp:AES_CM_128_HMAC_SHA1_80" || b.Protection != "rtp" {
		t.Fatalf("protection: softphone leg %q, SIPp leg %q; want SRTP (SDES AES_CM_128_HMAC_SHA1_80) and plain RTP", a.Protection, b.Protection)
	}
	if a.Relayed == 0 || b.Relayed == 0 {
		t.Fatalf("packets not relayed: softphone leg %+v, SIPp leg %+v", a, b)
	}

	lp.run(t, "generic", "terminate")
	answered()
	lp.await(t, "the call's end", 10*time.Second, func() bool {
		calls, err := d.api.Calls(t.Context())
		return err == nil && len(calls) == 0
	})
	d.stop()
}

// TestLinphoneWithSHA256Digest: on a site that opts in to RFC 8760
// (sip.digest ["SHA-256"], no MD5), linphonec registers over TLS: the
// registrar refuses a response in an algorithm it did not offer, so the
// binding proves the softphone answered the SHA-256 challenge.
func TestLinphoneWithSHA256Digest(t *testing.T) {
	testenv.NeedTool(t, "linphonecsh")
	caPEM, certPEM, keyPEM := linphoneCert(t)
	doc := benchDoc(2, []string{"tls:127.0.0.1:0"}, func(m map[string]any) {
		sip := m["sip"].(map[string]any)
		sip["tls"] = map[string]any{"cert_pem": certPEM, "key_pem": keyPEM}
		sip["digest"] = []string{"SHA-256"}
	})
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	lp := startLinphone(t, d.listener("tls"), caPEM, "user0001", "pw0001")
	lp.awaitRegistered(t, "registration over TLS with SHA-256")
	regs := awaitRegistrations(t, d, "user0001")
	log, _ := os.ReadFile(lp.log)
	if auth := regexp.MustCompile(`(?i)authorization: *digest [^\n]*`).FindAllString(string(log), -1); len(auth) == 0 || !strings.Contains(auth[len(auth)-1], "algorithm=SHA-256") {
		t.Errorf("linphonec's last Authorization, by its log: %q; want algorithm=SHA-256", auth)
	}
	if r := regs["user0001"]; !strings.Contains(strings.ToLower(r.UserAgent), "linphone") {
		t.Errorf("user0001's binding: %+v, want linphonec's", r)
	}
	d.stop()
}

// TestLinphoneInstantMessages: the softphone (user0001, over TLS) sends
// an instant message to a phone on UDP (SIPp as user0000, which checks
// the text and the sender) and receives one from it, both through the
// box: MESSAGE challenged, relayed and answered 200 each way.
func TestLinphoneInstantMessages(t *testing.T) {
	needSIPp(t)
	testenv.NeedTool(t, "linphonecsh")
	caPEM, certPEM, keyPEM := linphoneCert(t)
	doc := benchDoc(2, []string{"udp:127.0.0.1:0", "tls:127.0.0.1:0"}, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^user\d{4}$`, "route": "local"}}
		m["sip"].(map[string]any)["tls"] = map[string]any{"cert_pem": certPEM, "key_pem": keyPEM}
	})
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	received := answeringPhoneWith(t, d.listener("udp"), "user0000", "pw0000", "uas_message_linphone.xml")
	lp := startLinphone(t, d.listener("tls"), caPEM, "user0001", "pw0001")
	lp.awaitRegistered(t, "registration over TLS")
	lp.run(t, "generic", "chat sip:user0000@bench.local hello from linphone")
	received()

	csv := filepath.Join(t.TempDir(), "sender.csv")
	if err := os.WriteFile(csv, []byte("SEQUENTIAL\nuser0000;[authentication username=user0000 password=pw0000];0;user0001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := sipp(t, "uac_message_200.xml", d.listener("udp"), csv, 1, 1); err != nil {
		t.Fatalf("message to the softphone: %v\n%s\nlinphonec log:\n%s", err, tail(out, 2000), lp.logTail())
	}
	lp.await(t, "the message from user0000", 10*time.Second, func() bool {
		b, _ := os.ReadFile(lp.log)
		return strings.Contains(string(b), "hello from user0000: the branch is up")
	})
	d.stop()
}

// linphoneCert is a CA and the box's certificate as linphonec checks it:
// belle-sip on mbedTLS 2 does not read IP addresses in subjectAltName,
// so the certificate names 127.0.0.1 in its CN only.
func linphoneCert(t *testing.T) (caPEM, certPEM, keyPEM string) {
	t.Helper()
	caPEM, certPEM, keyPEM, _ = testCAWith(t, func(leaf *x509.Certificate) {
		leaf.Subject = pkix.Name{CommonName: "127.0.0.1"}
		leaf.IPAddresses, leaf.DNSNames = nil, nil
	})
	return caPEM, certPEM, keyPEM
}

// linphone is one linphonec daemon driven by linphonecsh. linphonecsh
// talks to its daemon over one socket per user (/tmp/linphonec-UID), so
// one runs at a time on the machine.
type linphone struct {
	home, log string
}

// startLinphone starts linphonec for user, registering at the box's TLS
// listener addr and trusting the CA in caPEM, with SRTP (SDES) mandatory
// and random SIP and RTP ports.
func startLinphone(t *testing.T, addr, caPEM, user, password string) *linphone {
	t.Helper()
	lp := &linphone{home: t.TempDir()}
	lp.log = filepath.Join(lp.home, "linphonec.log")
	// Its database lives there; without the directory it does not start.
	if err := os.MkdirAll(filepath.Join(lp.home, ".local", "share", "linphone"), 0o700); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(lp.home, "ca.pem")
	if err := os.WriteFile(ca, []byte(caPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	rc := filepath.Join(lp.home, "linphonerc")
	conf := fmt.Sprintf(`[sip]
sip_port=-1
sip_tcp_port=-1
sip_tls_port=-1
default_proxy=0
media_encryption=srtp
media_encryption_mandatory=1
root_ca=%[1]s
verify_server_certs=1
verify_server_cn=1

[rtp]
audio_rtp_port=-1

[sound]
echocancellation=0

[auth_info_0]
username=%[2]s
userid=%[2]s
passwd=%[3]s
realm=bench.local
domain=bench.local

[proxy_0]
reg_proxy=<sip:%[4]s;transport=tls>
reg_route=<sip:%[4]s;transport=tls>
reg_identity="%[2]s" <sip:%[2]s@bench.local>
reg_expires=600
reg_sendregister=1
publish=0
`, ca, user, password, addr)
	if err := os.WriteFile(rc, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	lp.run(t, "exit") // a daemon left by an interrupted run
	lp.run(t, "init", "-c", rc, "-d", "6", "-l", lp.log)
	t.Cleanup(func() {
		lp.run(t, "exit")
		// linphonecsh exit asks; a daemon that does not listen is killed.
		_ = exec.Command("pkill", "-f", "linphonec.*"+rc).Run()
	})
	return lp
}

// run runs linphonecsh with args and returns what it printed.
func (lp *linphone) run(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "linphonecsh", args...)
	cmd.Env = append(os.Environ(), "HOME="+lp.home)
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// await polls linphonec (it has no event stream to wait on) until ok.
func (lp *linphone) await(t *testing.T, what string, within time.Duration, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !ok(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("linphonec: no %s within %v\nlog:\n%s", what, within, lp.logTail())
		}
	}
}

// awaitRegistered waits (what names it) for linphonec's registration.
func (lp *linphone) awaitRegistered(t *testing.T, what string) {
	t.Helper()
	lp.await(t, what, 20*time.Second, func() bool {
		return strings.HasPrefix(lp.run(t, "status", "register"), "registered,")
	})
}

// logTail is the end of linphonec's log, without its sound-card noise.
func (lp *linphone) logTail() string {
	b, _ := os.ReadFile(lp.log)
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, "alsa") && !strings.Contains(l, "soundcard") && !strings.Contains(l, "encoder for") {
			keep = append(keep, l)
		}
	}
	return tail(strings.Join(keep, "\n"), 6000)
}

// toneWAV writes 10 s of a 440 Hz tone, 8 kHz 16-bit mono, and returns
// its path: what linphonec plays into the call.
func toneWAV(t *testing.T) string {
	t.Helper()
	const rate, seconds = 8000, 10
	data := make([]byte, 2*rate*seconds)
	for i := range rate * seconds {
		binary.LittleEndian.PutUint16(data[2*i:], uint16(int16(8000*math.Sin(2*math.Pi*440*float64(i)/rate))))
	}
	hdr := make([]byte, 44)
	copy(hdr, "RIFF")
	binary.LittleEndian.PutUint32(hdr[4:], uint32(36+len(data)))
	copy(hdr[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(hdr[16:], 16)
	binary.LittleEndian.PutUint16(hdr[20:], 1) // PCM
	binary.LittleEndian.PutUint16(hdr[22:], 1) // mono
	binary.LittleEndian.PutUint32(hdr[24:], rate)
	binary.LittleEndian.PutUint32(hdr[28:], 2*rate)
	binary.LittleEndian.PutUint16(hdr[32:], 2)
	binary.LittleEndian.PutUint16(hdr[34:], 16)
	copy(hdr[36:], "data")
	binary.LittleEndian.PutUint32(hdr[40:], uint32(len(data)))
	p := filepath.Join(t.TempDir(), "tone.wav")
	if err := os.WriteFile(p, append(hdr, data...), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
