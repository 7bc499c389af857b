package fuzz

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"
)

// Monitor registers User every Interval with digest authentication
// (REGISTER, 401, REGISTER with credentials, 200), from its own socket so
// the fuzz traffic's failed authentications never count against it.
type Monitor struct {
	User, Password string
	Domain         string        // Request-URI and AOR domain (default: the target)
	Local          string        // default 127.0.0.2:0
	Interval       time.Duration // default 1 s
	Timeout        time.Duration // per answer, with retransmissions (default 4 s)
}

// MonitorResult is what the monitor saw.
type MonitorResult struct {
	Attempts, OK int
	// MaxGap is the longest time between two successful registrations
	// (from the start to the first, and from the last to the end too).
	MaxGap time.Duration
	// Failures holds the first few failure reasons.
	Failures []string
}

type monitor struct {
	cfg    Monitor
	target string
	listen func(network, addr string) (net.PacketConn, error)

	mu  sync.Mutex
	res MonitorResult
}

func newMonitor(cfg Monitor, target string, listen func(network, addr string) (net.PacketConn, error)) *monitor {
	if cfg.Local == "" {
		cfg.Local = "127.0.0.2:0"
	}
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 4 * time.Second
	}
	if cfg.Domain == "" {
		cfg.Domain = target
	}
	return &monitor{cfg: cfg, target: target, listen: listen}
}

func (m *monitor) result() MonitorResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.res
}

func (m *monitor) fail(why string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.res.Failures) < 10 {
		m.res.Failures = append(m.res.Failures, time.Now().Format("15:04:05.000")+" "+why)
	}
}

func (m *monitor) run(ctx context.Context) {
	pc, err := m.listen("udp", m.cfg.Local)
	if err != nil {
		m.fail("monitor socket: " + err.Error())
		return
	}
	defer pc.Close()
	dst, err := net.ResolveUDPAddr("udp", m.target)
	if err != nil {
		m.fail(err.Error())
		return
	}
	lastOK := time.Now()
	tick := time.NewTicker(m.cfg.Interval)
	defer tick.Stop()
	for seq := 1; ; seq++ {
		err := m.register(ctx, pc, dst, seq)
		now := time.Now()
		m.mu.Lock()
		m.res.Attempts++
		if err == nil {
			m.res.OK++
			m.res.MaxGap = max(m.res.MaxGap, now.Sub(lastOK))
			lastOK = now
		}
		m.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			m.fail(err.Error())
		}
		select {
		case <-ctx.Done():
			m.mu.Lock()
			if err != nil {
				m.res.Attempts-- // cut short by the end of the run
			}
			m.res.MaxGap = max(m.res.MaxGap, time.Since(lastOK))
			m.mu.Unlock()
			return
		case <-tick.C:
		}
	}
}

// register does one digest registration: REGISTER, 401, REGISTER, 200.
func (m *monitor) register(ctx context.Context, pc net.PacketConn, dst net.Addr, seq int) error {
	callID := fmt.Sprintf("fuzz-monitor-%d-%d", time.Now().UnixNano(), seq)
	build := func(cseq int, auth string) []byte {
		var b strings.Builder
		fmt.Fprintf(&b, "REGISTER sip:%s SIP/2.0\r\n", m.cfg.Domain)
		fmt.Fprintf(&b, "Via: SIP/2.0/UDP %s;rport;branch=z9hG4bK%x\r\n", pc.LocalAddr(), rand.Uint64())
		b.WriteString("Max-Forwards: 70\r\n")
		fmt.Fprintf(&b, "From: <sip:%s@%s>;tag=mon%d\r\n", m.cfg.User, m.cfg.Domain, seq)
		fmt.Fprintf(&b, "To: <sip:%s@%s>\r\n", m.cfg.User, m.cfg.Domain)
		fmt.Fprintf(&b, "Call-ID: %s\r\nCSeq: %d REGISTER\r\n", callID, cseq)
		fmt.Fprintf(&b, "Contact: <sip:%s@%s>;expires=60\r\n", m.cfg.User, pc.LocalAddr())
		if auth != "" {
			b.WriteString("Authorization: " + auth + "\r\n")
		}
		b.WriteString("Content-Length: 0\r\n\r\n")
		return []byte(b.String())
	}
	res, err := m.exchange(ctx, pc, dst, build(1, ""), callID, 1)
	if err != nil {
		return fmt.Errorf("first REGISTER: %w", err)
	}
	code := status(res)
	if code == 200 {
		return nil
	}
	if code != 401 {
		return fmt.Errorf("first REGISTER answered %d", code)
	}
	auth, err := m.answerChallenge(res)
	if err != nil {
		return err
	}
	if res, err = m.exchange(ctx, pc, dst, build(2, auth), callID, 2); err != nil {
		return fmt.Errorf("REGISTER with credentials: %w", err)
	}
	if code := status(res); code != 200 {
		return fmt.Errorf("REGISTER with credentials answered %d", code)
	}
	return nil
}

// exchange sends req and waits for a final answer with callID and cseq,
// retransmitting after 0.5, 1 and 2 s (RFC 3261 Timer E) until Timeout.
func (m *monitor) exchange(ctx context.Context, pc net.PacketConn, dst net.Addr, req []byte, callID string, cseq int) ([]byte, error) {
	deadline := time.Now().Add(m.cfg.Timeout)
	buf := make([]byte, 65536)
	wantCSeq := fmt.Sprintf("CSeq: %d REGISTER", cseq)
	for wait := 500 * time.Millisecond; ; wait = min(2*wait, 4*time.Second) {
		if _, err := pc.WriteTo(req, dst); err != nil {
			return nil, err
		}
		until := time.Now().Add(wait)
		if until.After(deadline) {
			until = deadline
		}
		for {
			pc.SetReadDeadline(until)
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				break
			}
			msg := buf[:n]
			if bytes.Contains(msg, []byte(callID)) && bytes.Contains(msg, []byte(wantCSeq)) && status(msg) >= 200 {
				return bytes.Clone(msg), nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("no answer within %s", m.cfg.Timeout)
		}
	}
}

func status(msg []byte) int {
	var code int
	fmt.Sscanf(string(msg), "SIP/2.0 %d", &code)
	return code
}

// answerChallenge computes the Authorization for the MD5 challenge of a
// 401 (RFC 2617 / RFC 8760; qop=auth when offered).
func (m *monitor) answerChallenge(res []byte) (string, error) {
	for _, line := range strings.Split(string(res), "\r\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "WWW-Authenticate") {
			continue
		}
		p := digestParams(v)
		if alg := p["algorithm"]; alg != "" && !strings.EqualFold(alg, "MD5") {
			continue
		}
		uri := "sip:" + m.cfg.Domain
		ha1 := md5hex(m.cfg.User + ":" + p["realm"] + ":" + m.cfg.Password)
		ha2 := md5hex("REGISTER:" + uri)
		auth := fmt.Sprintf(`Digest username="%s", realm="%s", nonce="%s", uri="%s", algorithm=MD5`, m.cfg.User, p["realm"], p["nonce"], uri)
		if strings.Contains(p["qop"], "auth") {
			cnonce := fmt.Sprintf("%08x", rand.Uint32())
			auth += fmt.Sprintf(`, qop=auth, nc=00000001, cnonce="%s", response="%s"`, cnonce,
				md5hex(ha1+":"+p["nonce"]+":00000001:"+cnonce+":auth:"+ha2))
		} else {
			auth += fmt.Sprintf(`, response="%s"`, md5hex(ha1+":"+p["nonce"]+":"+ha2))
		}
		if op, ok := p["opaque"]; ok {
			auth += fmt.Sprintf(`, opaque="%s"`, op)
		}
		return auth, nil
	}
	return "", fmt.Errorf("401 without an MD5 challenge")
}

// digestParams reads `Digest realm="x", nonce="y", qop="auth"`.
func digestParams(v string) map[string]string {
	p := map[string]string{}
	v = strings.TrimSpace(v)
	if i := strings.IndexByte(v, ' '); i > 0 {
		v = v[i+1:]
	}
	for v != "" {
		k, rest, ok := strings.Cut(v, "=")
		if !ok {
			break
		}
		k = strings.ToLower(strings.TrimSpace(strings.TrimLeft(k, ", ")))
		rest = strings.TrimLeft(rest, " ")
		var val string
		if strings.HasPrefix(rest, `"`) {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				break
			}
			val, rest = rest[1:1+end], rest[2+end:]
		} else {
			val, rest, _ = strings.Cut(rest, ",")
			val = strings.TrimSpace(val)
			rest = "," + rest
		}
		p[k] = val
		v = strings.TrimLeft(rest, ", ")
	}
	return p
}

func md5hex(s string) string {
	h := md5.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}
