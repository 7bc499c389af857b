// regload registers N distinct users with digest authentication (REGISTER →
// 401 → REGISTER with credentials → 200) against a running registrar, over
// UDP or TLS, with the same code path for both, and prints the registration
// rate. Over TLS each worker keeps one connection for all its users (as
// phones do); over UDP each worker has one socket. The run is bounded by
// -users and -timeout; it is meant for loopback only (the TLS peer's
// certificate is not verified: the box makes its own at first boot).
//
//	regload -transport tls -addr 127.0.0.1:5061 -users 2000 -workers 16
//
// Output: one line "transport=tls users=2000 ok=2000 failed=0 elapsed_s=1.23
// rate=1626.0/s p50_ms=8.1 p99_ms=30.2".
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	icdigest "github.com/icholy/digest"
)

func main() {
	transport := flag.String("transport", "udp", "udp or tls")
	addr := flag.String("addr", "127.0.0.1:5060", "the registrar's ip:port")
	realm := flag.String("realm", "bench.local", "the registrar's realm (Request-URI host)")
	users := flag.Int("users", 1000, "distinct users to register (user%04d / pw%04d)")
	workers := flag.Int("workers", 16, "concurrent workers (one socket or TLS connection each)")
	timeout := flag.Duration("timeout", 30*time.Second, "bound of the whole run")
	flag.Parse()
	if *transport != "udp" && *transport != "tls" || *users <= 0 || *workers <= 0 {
		flag.Usage()
		os.Exit(2)
	}
	deadline := time.Now().Add(*timeout)
	var ok, failed atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for w := range *workers {
		wg.Go(func() {
			c, err := dial(*transport, *addr)
			if err != nil {
				firstErr.CompareAndSwap(nil, err)
				for i := w; i < *users; i += *workers {
					failed.Add(1)
				}
				return
			}
			defer c.Close()
			var mine []time.Duration
			for i := w; i < *users; i += *workers {
				if time.Now().After(deadline) {
					failed.Add(1)
					continue
				}
				t0 := time.Now()
				if err := register(c, *transport, *realm, i, deadline); err != nil {
					firstErr.CompareAndSwap(nil, err)
					failed.Add(1)
					continue
				}
				mine = append(mine, time.Since(t0))
				ok.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	fmt.Printf("transport=%s users=%d ok=%d failed=%d elapsed_s=%.3f rate=%.1f/s p50_ms=%.2f p99_ms=%.2f\n",
		*transport, *users, ok.Load(), failed.Load(), elapsed.Seconds(), float64(ok.Load())/elapsed.Seconds(), pct(0.5), pct(0.99))
	if e := firstErr.Load(); e != nil {
		fmt.Fprintln(os.Stderr, "regload: first error:", e)
	}
	if failed.Load() > 0 {
		os.Exit(1)
	}
}

// conn is one worker's transport: a UDP socket or a TLS connection.
type conn struct {
	net.Conn
	r     *bufio.Reader // TLS: the stream, read message by message
	buf   []byte        // UDP: the datagram buffer
	local string        // our ip:port, for Via and Contact
}

func dial(transport, addr string) (*conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	if transport == "tls" {
		// Loopback benchmark against the box's self-made certificate.
		c, err := tls.DialWithDialer(&d, "tcp", addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // loopback benchmark
		if err != nil {
			return nil, fmt.Errorf("dial tls %s: %w", addr, err)
		}
		return &conn{Conn: c, r: bufio.NewReaderSize(c, 8192), local: c.LocalAddr().String()}, nil
	}
	c, err := d.Dial("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial udp %s: %w", addr, err)
	}
	return &conn{Conn: c, buf: make([]byte, 65536), local: c.LocalAddr().String()}, nil
}

// register runs one user's registration: REGISTER, its 401, the answer.
func register(c *conn, transport, realm string, i int, deadline time.Time) error {
	user, pass := fmt.Sprintf("user%04d", i), fmt.Sprintf("pw%04d", i)
	callID := fmt.Sprintf("regload-%d-%d", os.Getpid(), i)
	tr := strings.ToUpper(transport)
	msg := func(cseq int, authz string) []byte {
		var b bytes.Buffer
		fmt.Fprintf(&b, "REGISTER sip:%s SIP/2.0\r\nVia: SIP/2.0/%s %s;branch=z9hG4bK-%s-%d;rport\r\nMax-Forwards: 70\r\n", realm, tr, c.local, callID, cseq)
		fmt.Fprintf(&b, "From: <sip:%s@%s>;tag=t%d\r\nTo: <sip:%s@%s>\r\nCall-ID: %s\r\nCSeq: %d REGISTER\r\n", user, realm, i, user, realm, callID, cseq)
		fmt.Fprintf(&b, "Contact: <sip:%s@%s;transport=%s>\r\nExpires: 3600\r\n", user, c.local, transport)
		if authz != "" {
			fmt.Fprintf(&b, "Authorization: %s\r\n", authz)
		}
		b.WriteString("Content-Length: 0\r\n\r\n")
		return b.Bytes()
	}
	res, err := c.exchange(msg(1, ""), deadline)
	if err != nil {
		return fmt.Errorf("%s: first REGISTER: %w", user, err)
	}
	if code := status(res); code != 401 {
		return fmt.Errorf("%s: first REGISTER answered %d, want 401", user, code)
	}
	ch, err := icdigest.ParseChallenge(header(res, "WWW-Authenticate"))
	if err != nil {
		return fmt.Errorf("%s: challenge: %w", user, err)
	}
	cr, err := icdigest.Digest(ch, icdigest.Options{Method: "REGISTER", URI: "sip:" + realm, Username: user, Password: pass, Count: 1})
	if err != nil {
		return fmt.Errorf("%s: digest: %w", user, err)
	}
	res, err = c.exchange(msg(2, cr.String()), deadline)
	if err != nil {
		return fmt.Errorf("%s: REGISTER with credentials: %w", user, err)
	}
	if code := status(res); code != 200 {
		return fmt.Errorf("%s: REGISTER with credentials answered %d, want 200", user, code)
	}
	return nil
}

// exchange sends a request and returns its final response (UDP: sent
// again after 500 ms and 1 s, RFC 3261 Timer E, until the deadline).
func (c *conn) exchange(req []byte, deadline time.Time) ([]byte, error) {
	if c.r != nil {
		if _, err := c.Write(req); err != nil {
			return nil, err
		}
		_ = c.SetReadDeadline(deadline)
		for {
			res, err := readStream(c.r)
			if err != nil {
				return nil, err
			}
			if status(res) >= 200 {
				return res, nil
			}
		}
	}
	wait := 500 * time.Millisecond
	for {
		if _, err := c.Write(req); err != nil {
			return nil, err
		}
		until := time.Now().Add(wait)
		if until.After(deadline) {
			until = deadline
		}
		_ = c.SetReadDeadline(until)
		for {
			n, err := c.Read(c.buf)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				break
			}
			if err != nil {
				return nil, err
			}
			if res := c.buf[:n]; status(res) >= 200 && sameTx(req, res) {
				return append([]byte(nil), res...), nil
			}
		}
		if time.Now().After(deadline) {
			return nil, errors.New("no response before the deadline")
		}
		wait = min(2*wait, 4*time.Second)
	}
}

// sameTx matches a response to our request by its branch (a late answer
// to an earlier retransmission is dropped).
func sameTx(req, res []byte) bool {
	_, b, ok := bytes.Cut(req, []byte("branch="))
	if !ok {
		return false
	}
	b, _, _ = bytes.Cut(b, []byte(";"))
	return bytes.Contains(res, b)
}

// readStream reads one SIP message from a stream: headers to the blank
// line, then Content-Length bytes (RFC 3261 §18.3).
func readStream(r *bufio.Reader) ([]byte, error) {
	var msg bytes.Buffer
	length := 0
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		if msg.Len() == 0 && strings.TrimSpace(line) == "" {
			continue // keep-alive CRLF
		}
		msg.WriteString(line)
		if line == "\r\n" || line == "\n" {
			break
		}
		k, v, ok := strings.Cut(line, ":")
		if ok && (strings.EqualFold(strings.TrimSpace(k), "Content-Length") || strings.TrimSpace(k) == "l") {
			length, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if length > 0 {
		if length > 1<<16 {
			return nil, fmt.Errorf("content-length %d too large", length)
		}
		body := make([]byte, length)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, err
		}
		msg.Write(body)
	}
	return msg.Bytes(), nil
}

// status reads a response's status code; 0 when it is not one.
func status(res []byte) int {
	if !bytes.HasPrefix(res, []byte("SIP/2.0 ")) || len(res) < 11 {
		return 0
	}
	n, err := strconv.Atoi(string(res[8:11]))
	if err != nil {
		return 0
	}
	return n
}

// header returns the value of a response header ("" if absent).
func header(res []byte, name string) string {
	for line := range strings.SplitSeq(string(res), "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(strings.TrimSpace(k), name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
