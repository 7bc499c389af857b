package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/media/g711"
)

// writeTonePcap writes a pcap (Ethernet, IPv4, UDP) of RTP PCMU packets
// carrying d of a sine at f Hz, 20 ms apart, for SIPp's
// play_pcap_audio (which replaces the addresses and ports).
func writeTonePcap(t *testing.T, path string, f float64, d time.Duration) {
	t.Helper()
	le := binary.LittleEndian
	var b []byte
	b = le.AppendUint32(b, 0xa1b2c3d4)
	b = le.AppendUint16(b, 2)
	b = le.AppendUint16(b, 4)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint32(b, 65535)
	b = le.AppendUint32(b, 1) // Ethernet
	n := int(d / (20 * time.Millisecond))
	for i := range n {
		rtp := []byte{0x80, 0, 0, 0, 0, 0, 0, 0, 0x11, 0x22, 0x33, 0x44}
		binary.BigEndian.PutUint16(rtp[2:], uint16(i))
		binary.BigEndian.PutUint32(rtp[4:], uint32(i*160))
		for j := range 160 {
			k := i*160 + j
			rtp = append(rtp, g711.LinearToUlaw(int16(10000*math.Sin(2*math.Pi*f*float64(k)/8000))))
		}
		udp := binary.BigEndian.AppendUint16(nil, 40000)
		udp = binary.BigEndian.AppendUint16(udp, 40000)
		udp = binary.BigEndian.AppendUint16(udp, uint16(8+len(rtp)))
		udp = append(udp, 0, 0)
		ip := []byte{0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(udp)+len(rtp)))
		eth := []byte{0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 6, 0x08, 0}
		pkt := append(append(append(eth, ip...), udp...), rtp...)
		at := time.Duration(i) * 20 * time.Millisecond
		b = le.AppendUint32(b, uint32(at/time.Second))
		b = le.AppendUint32(b, uint32(at%time.Second/time.Microsecond))
		b = le.AppendUint32(b, uint32(len(pkt)))
		b = le.AppendUint32(b, uint32(len(pkt)))
		b = append(b, pkt...)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// toneOf measures a recording: the length of its loud part (20 ms frames
// above -30 dBFS) and that part's frequency by zero crossings.
func toneOf(pcm []int16) (time.Duration, float64) {
	var loud []int16
	for i := 0; i+160 <= len(pcm); i += 160 {
		var sum int
		for _, v := range pcm[i : i+160] {
			sum += int(math.Abs(float64(v)))
		}
		if sum/160 > 1000 {
			loud = append(loud, pcm[i:i+160]...)
		}
	}
	cross := 0
	for i := 1; i < len(loud); i++ {
		if (loud[i-1] < 0) != (loud[i] < 0) {
			cross++
		}
	}
	dur := time.Duration(len(loud)) * time.Second / 8000
	if len(loud) == 0 {
		return 0, 0
	}
	return dur, float64(cross) / 2 / dur.Seconds()
}

// readPCM reads a WAV the box wrote: the 44-byte header, then 16-bit PCM.
func readPCM(t *testing.T, path string) []int16 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 44 || string(b[0:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		t.Fatalf("%s is not a WAV file", path)
	}
	n := min(int(binary.LittleEndian.Uint32(b[40:])), len(b)-44)
	out := make([]int16, n/2)
	for i := range out {
		out[i] = int16(binary.LittleEndian.Uint16(b[44+2*i:]))
	}
	return out
}

// TestVoicemailAcrossAWANCut: with the WAN cut (survivable mode, the
// pilot at HQ out of reach), user0000 calls user0002, whose phone is busy
// and whose voicemail is fallback: the box answers, the caller (SIPp)
// presses # to skip the greeting and plays a 440 Hz tone of 3 s from a
// pcap. The box keeps a WAV of that tone (measured: frequency and length)
// and lights user0002's lamp with an unsolicited NOTIFY (checked by
// SIPp: Messages-Waiting: yes, 1/0). user0002 dials *97, presses 1 (an
// RFC 4733 event) and hears the message: the tone is measured on the RTP
// it receives. Then user0000 leaves a long message
// for user0001 (local voicemail, no phone) and the box is killed (SIGKILL)
// in the middle: restarted, it keeps the message up to its last second,
// as a WAV that plays.
func TestVoicemailAcrossAWANCut(t *testing.T) {
	needSIPp(t)
	b := newBranch(t)
	startSIPpServer(t, b.tp, "hq", nsHQ, "hq.xml", "-deadcall_wait", "1000")
	doc := benchDoc(3, []string{"udp:" + nsBoxLAN + ":5060", "udp:" + nsBoxWAN + ":5060"}, func(m map[string]any) {
		m["users"].([]map[string]any)[1]["voicemail"] = "local"
		m["users"].([]map[string]any)[2]["voicemail"] = "fallback"
		m["wan"] = map[string]any{"interface": "wan0"}
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^user\d{4}$`, "route": "local"},
			{"name": "hq", "match": `^5\d{3}$`, "route": "hq"}}
		m["hq"] = map[string]any{"targets": []string{nsHQ + ":5060"}, "options_interval_ms": 300, "down_after": 2, "up_after": 2, "hold_s": 2,
			"voicemail_pilot": "5999"}
		m["media"] = map[string]any{"relay": true, "port_min": 30000, "port_max": 30999}
	})
	dataDir := t.TempDir()
	d := startDaemonIn(t, b.box, dataDir, writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	d.waitFor("normal mode", 15*time.Second, func(s api.Status) bool { return s.Mode == "normal" })
	b.tp.Down("box", "wan0")
	d.waitFor("survivable after the WAN cut", 10*time.Second, func(s api.Status) bool { return s.Mode == "survivable" })

	b.registerPhone(t, "user0002", "5072")
	phone := startSIPpServer(t, b.tp, "phone", nsPhone, "uas_busy_mwi.xml", "-p", "5072", "-m", "2")
	work := t.TempDir()
	tone := filepath.Join(work, "tone.pcap")
	writeTonePcap(t, tone, 440, 3*time.Second)
	const pound = "/usr/share/sip-tester/dtmf_2833_pound.pcap"
	if _, err := os.Stat(pound); err != nil {
		t.Skipf("SIPp's DTMF pcap is missing (%v): the sip-tester package ships it", err)
	}
	// leave prepares the caller: user0000 calls number, plays the tone
	// pcap and hangs up after hold.
	leave := func(number, tone string, hold time.Duration) func() (string, error) {
		scenario := filepath.Join(t.TempDir(), "uac_voicemail.xml")
		sf, err := os.ReadFile(filepath.Join("testdata", "sipp", "uac_voicemail.xml"))
		if err != nil {
			t.Fatal(err)
		}
		sf = bytes.ReplaceAll(bytes.ReplaceAll(sf, []byte("TONE_PCAP"), []byte(tone)), []byte("POUND_PCAP"), []byte(pound))
		if err := os.WriteFile(scenario, sf, 0o644); err != nil {
			t.Fatal(err)
		}
		csv := filepath.Join(t.TempDir(), "caller.csv")
		if err := os.WriteFile(csv, []byte("SEQUENTIAL\nuser0000;[authentication username=user0000 password=pw0000];0;"+number+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return func() (string, error) {
			return sippIn(t, b.tp.NS("phone"), scenario, nsBoxLAN+":5060", csv, 1, 1,
				"-i", nsPhone, "-mi", nsPhone, "-mp", "40000", "-d", strconv.Itoa(int(hold/time.Millisecond)))
		}
	}
	if out, err := leave("user0002", tone, 3600*time.Millisecond)(); err != nil {
		t.Fatalf("caller: %v\n%s", err, tail(out, 3000))
	}
	hungUp := time.Now()
	select {
	case err := <-phone.done:
		phone.done <- err
		if err != nil {
			t.Fatalf("user0002's phone (MWI): %v\n%s", err, tail(phone.out.String(), 3000))
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no MWI NOTIFY at user0002's phone\n%s\n%s", tail(phone.out.String(), 2000), tail(d.log.String(), 3000))
	}
	t.Logf("hang-up to MWI: %v", time.Since(hungUp))
	files, _ := filepath.Glob(filepath.Join(dataDir, "voicemail", "user0002", "*.wav"))
	if len(files) != 1 {
		t.Fatalf("messages of user0002: %v\n%s", files, tail(d.log.String(), 3000))
	}
	dur, f := toneOf(readPCM(t, files[0]))
	t.Logf("message: %v of %.1f Hz", dur, f)
	if f < 430 || f > 450 || dur < 2700*time.Millisecond || dur > 3300*time.Millisecond {
		t.Errorf("the message holds %v of %.1f Hz, the caller sent 3 s of 440 Hz", dur, f)
	}

	vm, err := d.api.Voicemail(t.Context())
	if err != nil || len(vm.Messages) != 1 || vm.Messages[0].Mailbox != "user0002" || vm.Messages[0].State != "new" ||
		vm.Messages[0].Caller != "user0000" || vm.Messages[0].DurationMS < 2700 || vm.Stats.Recorded != 1 {
		t.Errorf("API voicemail: %+v %v", vm, err)
	}

	// user0002 dials *97, presses 1 and hears the message: its tone
	// measured on the RTP the phone receives.
	ear := newRTPPeer(t, listenUDPIn(t, b.tp.Handle("phone"), nsPhone+":40010"), 0)
	csv := filepath.Join(work, "retrieve.csv")
	if err := os.WriteFile(csv, []byte("SEQUENTIAL\nuser0002;[authentication username=user0002 password=pw0002];0;*97\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	trace := &sippServer{t: t, trace: filepath.Join(work, "retrieve.log")}
	retrieved := make(chan error, 1)
	go func() {
		out, err := sippIn(t, b.tp.NS("phone"), "uac_retrieve.xml", nsBoxLAN+":5060", csv, 1, 1,
			"-i", nsPhone, "-trace_msg", "-message_file", trace.trace, "-d", "16000")
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, tail(out, 2000))
		}
		retrieved <- err
	}()
	sendKey(t, ear.pc, trace.answerMedia(), 1)
	heard := func() time.Duration {
		ear.mu.Lock()
		defer ear.mu.Unlock()
		return pureFor(ear.pcm, 440)
	}
	for deadline := time.Now().Add(20 * time.Second); heard() < 2*time.Second; {
		if time.Now().After(deadline) {
			t.Fatalf("*97: heard %v of the message's tone\n%s", heard(), tail(d.log.String(), 3000))
		}
		time.Sleep(100 * time.Millisecond) // the received audio has no event to wait on
	}
	t.Logf("*97: heard %v of the 440 Hz message", heard())
	if err := <-retrieved; err != nil {
		t.Fatalf("*97 caller: %v", err)
	}

	long := filepath.Join(work, "long.pcap")
	writeTonePcap(t, long, 440, 20*time.Second)
	caller := leave("user0001", long, 20*time.Second)
	callerOut := make(chan string, 1)
	go func() { out, _ := caller(); callerOut <- out }() // its BYE gets no answer: the box is gone
	var partial string
	for deadline := time.Now().Add(20 * time.Second); partial == ""; {
		files, _ := filepath.Glob(filepath.Join(dataDir, "voicemail", "user0001", "*.wav"))
		if len(files) == 1 {
			// 3 s of audio synced: the second and third syncs are done.
			if st, err := os.Stat(files[0]); err == nil && st.Size() >= 44+3*16000 {
				partial = files[0]
				break
			}
		}
		if time.Now().After(deadline) {
			out := ""
			select {
			case out = <-callerOut:
			default:
			}
			t.Fatalf("the long message does not grow: %v\n%s\n%s", files, tail(out, 2000), tail(d.log.String(), 3000))
		}
		time.Sleep(50 * time.Millisecond) // the file's size has no event to wait on
	}
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
	d.done <- nil
	synced := len(readPCM(t, partial))
	d = startDaemonIn(t, b.box, dataDir, "")
	if !strings.Contains(d.log.String(), "interrupted recording kept") {
		t.Errorf("restart did not keep the interrupted recording\n%s", tail(d.log.String(), 3000))
	}
	if vm, err := d.api.Voicemail(t.Context()); err != nil || len(vm.Messages) != 2 || vm.Messages[1].Mailbox != "user0001" || vm.Stats.Recovered != 1 {
		t.Errorf("API voicemail after the restart: %+v %v", vm, err)
	}
	if m, _ := d.metrics(); !strings.Contains(m, `outpost_voicemail_messages{delivered="no",state="new"} 2`) {
		t.Errorf("metrics:\n%s", m)
	}
	pcm := readPCM(t, partial)
	dur, f = toneOf(pcm)
	t.Logf("killed mid-message: header said %v before the restart; kept %v of %.1f Hz", time.Duration(synced)*time.Second/8000, dur, f)
	if f < 430 || f > 450 || dur < 2*time.Second {
		t.Errorf("the interrupted message holds %v of %.1f Hz, want the tone up to a second before the kill", dur, f)
	}
}

// sendKey sends an RFC 4733 telephone-event (payload type 101) for event
// from pc to dst: three packets, the end one sent three times.
func sendKey(t *testing.T, pc net.PacketConn, dst netip.AddrPort, event byte) {
	t.Helper()
	for i, end := range []bool{false, false, true, true, true} {
		pkt := []byte{0x80, 101, 0, byte(i), 0, 1, 0, 0, 0, 0, 0x47, 0x11, event, 10, 0, byte(160 * (i + 1))}
		if i == 0 {
			pkt[1] |= 0x80 // marker: the event's first packet
		}
		if end {
			pkt[13] |= 0x80
		}
		if _, err := pc.WriteTo(pkt, net.UDPAddrFromAddrPort(dst)); err != nil {
			t.Fatal(err)
		}
	}
}

// pureFor is how much of pcm (in 20 ms frames) is a pure tone at f: the
// frames whose energy is mostly at f (Goertzel), so speech prompts do not
// count.
func pureFor(pcm []int16, f float64) time.Duration {
	w := 2 * math.Pi * f / 8000
	coeff := 2 * math.Cos(w)
	n := 0
	for i := 0; i+160 <= len(pcm); i += 160 {
		var s1, s2, energy float64
		for _, v := range pcm[i : i+160] {
			x := float64(v)
			s0 := x + coeff*s1 - s2
			s2, s1 = s1, s0
			energy += x * x
		}
		if energy > 160*1000*1000 && (s1*s1+s2*s2-coeff*s1*s2)/(energy*80) > 0.9 {
			n++
		}
	}
	return time.Duration(n) * 20 * time.Millisecond
}
