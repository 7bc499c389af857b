package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/internal/testenv"
	"github.com/outpost/outpost/netcfg/netnstest"
)

// The baresip tests: Debian's baresip (baresip-core 1.0.0 on libre 1.x),
// a second real softphone beside linphonec, registers two users to the
// box with digest on the box's default challenge (libre before 2.x gives
// up with ENOSYS at the first algorithm it does not know, so a SHA-256
// challenge would show as "Function not implemented" in its log) and
// calls from one to the other through the box's RTP relay. Each phone
// sends a tone of its own (the caller toneWAV's 440 Hz through aufile, the
// callee a 1000 Hz sine from ausine), and each records what it decodes
// (sndfile): the far end's tone must be there, so audio went both ways
// through the box, and was not an echo.
//
// Over TLS, libre 1.x loads sip_cafile but does not check the box's
// certificate with it: the TLS test proves the transport, not that
// baresip verifies the box.

// Tones of the baresip calls: the caller's is toneWAV's.
const (
	callerHz = 440
	calleeHz = 1000
)

// TestBaresipCallOverUDP: user0001 (µ-law only) calls user0002 (A-law
// only, auto-answer), both registered over UDP with MD5 digest (the box's
// default challenge): the box offers the callee the other law, transcodes
// between the legs, relays plain RTP both ways, and each phone decodes the
// other's tone.
func TestBaresipCallOverUDP(t *testing.T) {
	baresipCall(t, baresipCase{transport: "udp", callerCodec: "pcmu", calleeCodec: "pcma"})
}

// TestBaresipCallWithSRTP: as TestBaresipCallOverUDP, with SRTP (SDES)
// mandatory on both phones (mediaenc=srtp-mand) and media.srtp "offer" on
// the box: the box terminates SRTP on each leg (AES_CM_128_HMAC_SHA1_80),
// decrypts, transcodes µ-law to A-law and back, and encrypts again, and
// the tones still arrive.
func TestBaresipCallWithSRTP(t *testing.T) {
	baresipCall(t, baresipCase{transport: "udp", callerCodec: "pcmu", calleeCodec: "pcma", srtp: true})
}

// TestBaresipCallOverTCP: as TestBaresipCallOverUDP, both phones
// registered and calling over TCP (libre keeps the connection only while
// every message on it carries Content-Length).
func TestBaresipCallOverTCP(t *testing.T) {
	baresipCall(t, baresipCase{transport: "tcp", callerCodec: "pcmu", calleeCodec: "pcma"})
}

// TestBaresipCallOverTLSWithSRTP: signalling over TLS and SDES-SRTP
// media, the pair a deployment that protects its keys uses (SDES keys
// travel in the SDP, so SRTP without TLS hides nothing from a listener).
func TestBaresipCallOverTLSWithSRTP(t *testing.T) {
	baresipCall(t, baresipCase{transport: "tls", callerCodec: "pcmu", calleeCodec: "pcma", srtp: true})
}

// TestBaresipCallBetweenLANs: as TestBaresipCallOverUDP, with the box
// and each phone in a network namespace of its own: the caller on one LAN,
// the callee on another, the box on both (a listener per interface) and
// forwarding no packet between them. The box's relay is the only way the
// tones can cross, so each one arriving proves the box anchored the media
// on the right interface of each leg.
// TestBaresipVideoCallWithSRTP: as TestBaresipCallWithSRTP, with VP8
// video beside the audio (baresip's fakevideo test pattern): the box
// anchors the video on ports of its own, with SRTP keys of its own per
// leg, and each phone decodes the other's frames.
func TestBaresipVideoCallWithSRTP(t *testing.T) {
	baresipCall(t, baresipCase{transport: "udp", callerCodec: "pcmu", calleeCodec: "pcma", srtp: true, video: true})
}

func TestBaresipCallBetweenLANs(t *testing.T) {
	baresipCall(t, baresipCase{transport: "udp", callerCodec: "pcmu", calleeCodec: "pcma", lans: true})
}

// baresipCase is one call between two baresip phones.
type baresipCase struct {
	transport                string // SIP transport of both phones: udp, tcp or tls
	callerCodec, calleeCodec string // baresip's names: pcmu, pcma
	srtp                     bool   // SDES-SRTP mandatory on both phones
	lans                     bool   // each phone on a LAN of its own (namespaces), else all on loopback
	video                    bool   // VP8 video from baresip's fakevideo source beside the audio
}

// Addresses of TestBaresipCallBetweenLANs: the box is .1 on each LAN.
const (
	floor1Box, floor1Phone = "198.18.40.1", "198.18.40.10"
	floor2Box, floor2Phone = "198.18.41.1", "198.18.41.10"
)

// baresipHost is where a phone runs and the box listener it registers to.
type baresipHost struct {
	ns        string // kernel name of its network namespace; "" for the test's own
	addr      string // its address
	registrar string // the box's listener, host:port
}

// twoLANs builds the box with a LAN on each side (lan0: floor1, lan1:
// floor2), forwarding off, and returns the box's namespace and the hosts of
// the caller (floor1) and the callee (floor2).
func twoLANs(t *testing.T) (box string, caller, callee baresipHost) {
	tp := netnstest.New(t)
	tp.Veth("box", "lan0", "floor1", "lan0")
	tp.Veth("box", "lan1", "floor2", "lan0")
	for _, x := range []struct{ ns, ifc, cidr string }{
		{"box", "lan0", floor1Box + "/24"}, {"floor1", "lan0", floor1Phone + "/24"},
		{"box", "lan1", floor2Box + "/24"}, {"floor2", "lan0", floor2Phone + "/24"},
	} {
		tp.Addr(x.ns, x.ifc, x.cidr)
		tp.Up(x.ns, x.ifc)
	}
	tp.Route("floor1", "add", "default", "via", floor1Box)
	tp.Route("floor2", "add", "default", "via", floor2Box)
	if f := strings.TrimSpace(tp.Exec("box", "cat", "/proc/sys/net/ipv4/ip_forward")); f != "0" {
		t.Fatalf("the box namespace forwards IPv4 (ip_forward %s): the tones could bypass the relay", f)
	}
	return tp.NS("box"), baresipHost{ns: tp.NS("floor1"), addr: floor1Phone, registrar: floor1Box + ":5060"},
		baresipHost{ns: tp.NS("floor2"), addr: floor2Phone, registrar: floor2Box + ":5060"}
}

func baresipCall(t *testing.T, c baresipCase) {
	if testing.Short() {
		t.Skip("-short: end-to-end test with baresip (make test runs it)")
	}
	testenv.NeedTool(t, "baresip")
	listen := []string{c.transport + ":127.0.0.1:0"}
	var boxNS string
	callerAt, calleeAt := baresipHost{addr: "127.0.0.1"}, baresipHost{addr: "127.0.0.1"}
	if c.lans {
		boxNS, callerAt, calleeAt = twoLANs(t)
		listen = []string{c.transport + ":lan0:5060", c.transport + ":lan1:5060"}
	}
	var caPEM, certPEM, keyPEM string
	if c.transport == "tls" {
		caPEM, certPEM, keyPEM, _ = testCA(t)
	}
	doc := benchDoc(3, listen, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^user\d{4}$`, "route": "local"}}
		media := map[string]any{"relay": true}
		if c.srtp {
			media["srtp"] = "offer"
		}
		m["media"] = media
		if c.transport == "tls" {
			m["sip"].(map[string]any)["tls"] = map[string]any{"cert_pem": certPEM, "key_pem": keyPEM}
		}
	})
	d := startDaemonIn(t, boxNS, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	if !c.lans {
		callerAt.registrar = d.listener(c.transport)
		calleeAt.registrar = callerAt.registrar
	}

	callee := startBaresip(t, baresipPhone{
		user: "user0002", password: "pw0002", transport: c.transport, at: calleeAt, caPEM: caPEM,
		codec: c.calleeCodec, srtp: c.srtp, answer: true, source: fmt.Sprintf("ausine,%d", calleeHz), video: c.video,
	})
	caller := startBaresip(t, baresipPhone{
		user: "user0001", password: "pw0001", transport: c.transport, at: callerAt, caPEM: caPEM,
		codec: c.callerCodec, srtp: c.srtp, source: "aufile," + toneWAV(t), video: c.video,
	})
	for _, p := range []*baresipUA{callee, caller} {
		p.await("registration", 10*time.Second, fmt.Sprintf("%s@bench.local: {0/%s/v4} 200 OK", p.user, strings.ToUpper(c.transport)))
	}
	regs := awaitRegistrations(t, d, "user0001", "user0002")
	for _, p := range []*baresipUA{callee, caller} {
		if r := regs[p.user]; !strings.Contains(r.UserAgent, "baresip") {
			t.Errorf("%s's binding: %+v, want baresip's", p.user, r)
		}
		// libre 1.x fails at the first challenge algorithm it does not know.
		if strings.Contains(p.log.String(), "Function not implemented") {
			t.Fatalf("%s: baresip could not answer the box's challenge:\n%s", p.user, p.logTail())
		}
	}

	caller.command("dial sip:user0002@bench.local")
	for _, p := range []*baresipUA{callee, caller} {
		p.await("the call established", 10*time.Second, "Call established")
	}
	// Two seconds of media each way through the box.
	var call api.Call
	deadline := time.Now().Add(15 * time.Second)
	for {
		calls, err := d.api.Calls(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(calls) == 1 && calls[0].Media != nil && calls[0].Media[0].Relayed >= 100 && calls[0].Media[1].Relayed >= 100 &&
			(!c.video || videoBothWays(calls[0])) {
			call = calls[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("media did not flow both ways through the box: %+v\ncaller:\n%s\ncallee:\n%s", calls, caller.logTail(), callee.logTail())
		}
		time.Sleep(100 * time.Millisecond) // the box's counters have no event to wait on
	}
	want := "rtp"
	if c.srtp {
		want = "srtp:AES_CM_128_HMAC_SHA1_80"
	}
	if a, b := call.Media[0], call.Media[1]; a.Protection != want || b.Protection != want {
		t.Errorf("protection: caller's leg %q, callee's leg %q; want %q on both", a.Protection, b.Protection, want)
	}
	// Each phone's codec, as it reports it: different laws, transcoded.
	for _, x := range []struct {
		p     *baresipUA
		codec string
	}{{caller, c.callerCodec}, {callee, c.calleeCodec}} {
		for _, dir := range []string{"encoder", "decoder"} {
			if line := "Set audio " + dir + ": " + strings.ToUpper(x.codec) + " 8000Hz"; !strings.Contains(x.p.log.String(), line) {
				t.Errorf("%s: no %q in its log:\n%s", x.p.user, line, x.p.logTail())
			}
		}
	}
	if c.srtp {
		for _, p := range []*baresipUA{callee, caller} {
			if !strings.Contains(p.log.String(), "SRTP is Enabled (cryptosuite=AES_CM_128_HMAC_SHA1_80)") {
				t.Errorf("%s: SRTP not enabled, by its log:\n%s", p.user, p.logTail())
			}
		}
	}

	if c.video {
		// Each phone decoded the other's VP8 (a frame's size is known
		// only once one decodes), under SRTP keys of the video's own.
		for _, p := range []*baresipUA{callee, caller} {
			p.await("decoded video", 10*time.Second, "video: receiving with resolution 320 x 240")
			if c.srtp && !strings.Contains(p.log.String(), "srtp: video: SRTP is Enabled") {
				t.Errorf("%s: video SRTP not enabled, by its log:\n%s", p.user, p.logTail())
			}
		}
		if v := call.Streams[0].Legs; v[0].Protection != want || v[1].Protection != want {
			t.Errorf("video protection: %+v", v)
		}
	} else if len(call.Streams) != 0 {
		t.Errorf("an audio call has other streams: %+v", call.Streams)
	}
	caller.command("hangup")
	for _, p := range []*baresipUA{callee, caller} {
		p.await("the call's end", 10*time.Second, "terminated (duration:")
	}
	d.poll(10*time.Second, func(api.Status) bool {
		calls, err := d.api.Calls(t.Context())
		return err == nil && len(calls) == 0
	})
	if calls, _ := d.api.Calls(t.Context()); len(calls) != 0 {
		t.Errorf("calls left on the box after the hangup: %+v", calls)
	}
	for _, p := range []*baresipUA{callee, caller} {
		p.quit()
	}
	checkTone(t, "the callee (from the caller)", callee.decoded(), callerHz)
	checkTone(t, "the caller (from the callee)", caller.decoded(), calleeHz)
	d.stop()
}

// videoBothWays reports whether a call's video stream went both ways
// through the box (20 packets each way: over a second of fakevideo).
func videoBothWays(c api.Call) bool {
	for _, s := range c.Streams {
		if s.Kind == "video" && s.Legs[0].Relayed >= 20 && s.Legs[1].Relayed >= 20 {
			return true
		}
	}
	return false
}

// awaitRegistrations waits (10 s at most) until the box's registrar holds
// a binding for each of users, and returns them by user.
func awaitRegistrations(t *testing.T, d *daemon, users ...string) map[string]api.Registration {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		regs, err := d.api.Registrations(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]api.Registration{}
		for _, r := range regs {
			// The AOR is the user ("user0001"), or its URI.
			user, _, _ := strings.Cut(strings.TrimPrefix(r.AOR, "sip:"), "@")
			if slices.Contains(users, user) {
				got[user] = r
			}
		}
		if len(got) == len(users) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("registrar: %+v, want bindings of %v", regs, users)
		}
		time.Sleep(100 * time.Millisecond) // the registrar has no event to wait on
	}
}

// baresipPhone is how one baresip is set up.
type baresipPhone struct {
	user, password string
	transport      string // udp, tcp, tls
	at             baresipHost
	caPEM          string // for tls: the CA of the box's certificate
	codec          string // its only audio codec
	srtp           bool   // SDES-SRTP mandatory
	answer         bool   // auto-answer
	source         string // audio_source: "ausine,HZ" or "aufile,PATH"
	video          bool   // VP8 video: fakevideo's test pattern sent, what comes decoded and dropped
}

// baresipUA is one running baresip, configured by a directory of its
// own, driven by commands on its standard input (the stdio module).
type baresipUA struct {
	t     *testing.T
	user  string
	dir   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	log   *notifyLog
	done  chan error
}

// startBaresip runs baresip -v for p in the foreground, SIP and RTP on
// random ports of p.at's address, recording what it decodes into its
// directory.
func startBaresip(t *testing.T, p baresipPhone) *baresipUA {
	t.Helper()
	dir := t.TempDir()
	conf := []string{
		"poll_method epoll",
		"sip_listen " + p.at.addr + ":0",
		"net_interface " + p.at.addr,
		"audio_source " + p.source,
		"audio_player aufile,none", // no player: sndfile records what is decoded
		"audio_alert aufile,none",
		"snd_path " + dir,
		"module_path /usr/lib/baresip/modules",
		"module stdio.so",
		"module g711.so",
		"module aufile.so",
		"module ausine.so",
		"module sndfile.so",
		"module_tmp account.so",
		"module_app menu.so",
	}
	if strings.HasPrefix(p.source, "ausine,") {
		// ausine makes 48 kHz stereo only; baresip resamples to the codec's.
		conf = append(conf, "ausrc_srate 48000", "ausrc_channels 2")
	}
	params := fmt.Sprintf(`;auth_pass=%s;outbound="sip:%s;transport=%s";regint=600;audio_codecs=%s`, p.password, p.at.registrar, p.transport, p.codec)
	if p.srtp {
		conf = append(conf, "module srtp.so")
		params += ";mediaenc=srtp-mand"
	}
	if p.answer {
		params += ";answermode=auto"
	}
	if p.video {
		conf = append(conf, "module fakevideo.so", "module vp8.so", "video_source fakevideo,nil", "video_display fakevideo,nil",
			"video_size 320x240", "video_fps 15", "video_bitrate 200000")
		params += ";video_codecs=vp8"
	}
	if p.caPEM != "" {
		ca := filepath.Join(dir, "ca.pem")
		if err := os.WriteFile(ca, []byte(p.caPEM), 0o600); err != nil {
			t.Fatal(err)
		}
		conf = append(conf, "sip_cafile "+ca)
	}
	account := fmt.Sprintf("<sip:%s@bench.local;transport=%s>%s\n", p.user, p.transport, params)
	for name, body := range map[string]string{"config": strings.Join(conf, "\n") + "\n", "accounts": account} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	b := &baresipUA{t: t, user: p.user, dir: dir, log: newNotifyLog(), done: make(chan error, 1)}
	args := []string{"baresip", "-v", "-f", dir}
	if p.at.ns != "" {
		args = append([]string{"ip", "netns", "exec", p.at.ns}, args...)
	}
	b.cmd = exec.CommandContext(ctx, args[0], args[1:]...)
	b.cmd.Stdout, b.cmd.Stderr = b.log, b.log
	var err error
	if b.stdin, err = b.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := b.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() { b.done <- b.cmd.Wait(); b.log.notify() }()
	t.Cleanup(func() {
		select {
		case <-b.done: // quit, or died
		default:
			b.cmd.Process.Kill()
			<-b.done
		}
		cancel()
		if t.Failed() {
			t.Logf("baresip %s log:\n%s", p.user, b.logTail())
		}
	})
	return b
}

// command sends baresip one command of its menu ("dial sip:...").
func (b *baresipUA) command(cmd string) {
	b.t.Helper()
	if _, err := io.WriteString(b.stdin, "/"+cmd+"\n"); err != nil {
		b.t.Fatalf("baresip %s: %s: %v", b.user, cmd, err)
	}
}

// await waits until baresip's log holds line, within the bound.
func (b *baresipUA) await(what string, within time.Duration, line string) {
	b.t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for !strings.Contains(b.log.String(), line) {
		select {
		case <-b.log.changed:
		case err := <-b.done:
			b.done <- err
			if !strings.Contains(b.log.String(), line) {
				b.t.Fatalf("baresip %s exited (%v) before %s:\n%s", b.user, err, what, b.logTail())
			}
			return
		case <-timer.C:
			b.t.Fatalf("baresip %s: no %s (%q) within %v:\n%s", b.user, what, line, within, b.logTail())
		}
	}
}

// quit asks baresip to quit and waits (5 s at most) for it to exit.
func (b *baresipUA) quit() {
	b.t.Helper()
	b.command("quit")
	select {
	case err := <-b.done:
		b.done <- err
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			b.t.Errorf("baresip %s: %v", b.user, err)
		}
	case <-time.After(5 * time.Second):
		b.t.Errorf("baresip %s did not quit within 5 s:\n%s", b.user, b.logTail())
	}
}

// logTail is the end of baresip's log without its once-a-tick call status.
func (b *baresipUA) logTail() string {
	var keep []string
	for _, l := range strings.FieldsFunc(b.log.String(), func(r rune) bool { return r == '\n' || r == '\r' }) {
		if !strings.Contains(l, "(bit/s)") {
			keep = append(keep, l)
		}
	}
	return tail(strings.Join(keep, "\n"), 6000)
}

// decoded is what baresip decoded during its one call (sndfile's
// dump-…-dec.wav): 16-bit mono samples at 8 kHz.
func (b *baresipUA) decoded() []int16 {
	b.t.Helper()
	files, _ := filepath.Glob(filepath.Join(b.dir, "dump-*-dec.wav"))
	if len(files) != 1 {
		b.t.Fatalf("baresip %s: decoded recordings %v, want one", b.user, files)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		b.t.Fatal(err)
	}
	pcm, rate, channels, err := wavSamples(raw)
	if err != nil || rate != 8000 || channels != 1 {
		b.t.Fatalf("baresip %s: %s: %d Hz, %d channels, %v; want 8 kHz mono", b.user, files[0], rate, channels, err)
	}
	return pcm
}

// wavSamples reads a 16-bit PCM WAV file: its samples (the data chunk up
// to the end of the file, whatever its header says, for a file still
// open), sample rate and channel count.
func wavSamples(b []byte) (pcm []int16, rate, channels int, err error) {
	if len(b) < 12 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		return nil, 0, 0, errors.New("not a WAV file")
	}
	for p := 12; p+8 <= len(b); {
		id, size := string(b[p:p+4]), int(binary.LittleEndian.Uint32(b[p+4:]))
		body := b[p+8:]
		switch id {
		case "fmt ":
			if size < 16 || len(body) < 16 || binary.LittleEndian.Uint16(body) != 1 || binary.LittleEndian.Uint16(body[14:]) != 16 {
				return nil, 0, 0, errors.New("not 16-bit PCM")
			}
			channels, rate = int(binary.LittleEndian.Uint16(body[2:])), int(binary.LittleEndian.Uint32(body[4:]))
		case "data":
			if rate == 0 {
				return nil, 0, 0, errors.New("data before fmt")
			}
			for i := 0; i+2 <= len(body); i += 2 {
				pcm = append(pcm, int16(binary.LittleEndian.Uint16(body[i:])))
			}
			return pcm, rate, channels, nil
		}
		p += 8 + size + size%2
	}
	return nil, 0, 0, errors.New("no data chunk")
}

// checkTone checks that pcm (8 kHz) holds at least a second of a tone at
// hz: blocks of 100 ms (a whole number of periods of either tone) whose
// energy is loud and almost all at hz, by the Goertzel filter's power at
// hz (exactly the block's energy for a pure tone there). Blocks before the
// media arrived or after it stopped are silent and do not count.
func checkTone(t *testing.T, who string, pcm []int16, hz float64) {
	t.Helper()
	const n = 800
	toned, loud := 0, 0
	for i := 0; i+n <= len(pcm); i += n {
		block := pcm[i : i+n]
		energy := 0.0
		for _, s := range block {
			energy += float64(s) * float64(s)
		}
		if math.Sqrt(energy/n) < 1000 {
			continue // silence (of 32767)
		}
		loud++
		if goertzel(block, hz, 8000)*2/(n*energy) >= 0.9 {
			toned++
		}
	}
	t.Logf("%s: %d of %d loud 100 ms blocks hold the %.0f Hz tone (%.1f s decoded)", who, toned, loud, hz, float64(len(pcm))/8000)
	if toned < 10 {
		t.Errorf("%s: %.0f Hz tone in %d blocks of 100 ms (of %d loud, %d in all), want 10 or more", who, hz, toned, loud, len(pcm)/n)
	}
}

// goertzel is the power |X(hz)|² of the samples at frequency hz.
func goertzel(samples []int16, hz, rate float64) float64 {
	k := 2 * math.Cos(2*math.Pi*hz/rate)
	var s1, s2 float64
	for _, x := range samples {
		s1, s2 = float64(x)+k*s1-s2, s1
	}
	return s1*s1 + s2*s2 - k*s1*s2
}

// notifyLog is a process's log (a syncBuffer) that signals each write on
// changed, for a test waiting on a line of it. It is a plain Writer (no
// ReadFrom), so os/exec's copy goes through Write.
type notifyLog struct {
	buf     syncBuffer
	changed chan struct{}
}

func newNotifyLog() *notifyLog { return &notifyLog{changed: make(chan struct{}, 1)} }

func (l *notifyLog) Write(p []byte) (int, error) {
	n, err := l.buf.Write(p)
	l.notify()
	return n, err
}

func (l *notifyLog) String() string { return l.buf.String() }

func (l *notifyLog) notify() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}
