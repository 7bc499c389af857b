package images

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/outpost/outpost/sipauth"
)

// The boot test's SIP client: just enough wire text to ask "is outpostd
// answering" (OPTIONS) and to leave a registration behind (REGISTER with
// a digest answer, RFC 3261 §22). It cannot use the gateway's code
// (images imports only images/ and the shared leaves such as sipauth).

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// sipExchange sends msg over c and returns the first response whose
// Call-ID is callID, waiting up to d.
func sipExchange(c net.Conn, msg, callID string, d time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, 65535)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return "", err
		}
		resp := string(buf[:n])
		if strings.HasPrefix(resp, "SIP/2.0 ") && strings.Contains(resp, callID) {
			return resp, nil
		}
	}
}

// waitSIP probes addr until it answers or ctx ends: one socket, an
// OPTIONS every 100 ms (a new transaction each), any answer to any of them
// ends the wait, so the boot report's "SIP ready" is within about 100 ms
// of the first moment outpostd could answer (one probe at a time, each
// waiting 500 ms for its own answer, was up to 750 ms late).
func waitSIP(ctx context.Context, addr string) error {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	id := randHex(8)
	buf := make([]byte, 65535)
	for n := 1; ; n++ {
		if ctx.Err() != nil {
			return fmt.Errorf("no SIP answer from %s: %w", addr, ctx.Err())
		}
		msg := "OPTIONS sip:" + addr + " SIP/2.0\r\n" +
			"Via: SIP/2.0/UDP " + c.LocalAddr().String() + ";branch=z9hG4bK" + id + "-" + itoa(n) + ";rport\r\n" +
			"Max-Forwards: 70\r\nFrom: <sip:probe@test.invalid>;tag=" + id + "\r\nTo: <sip:" + addr + ">\r\n" +
			"Call-ID: " + id + "\r\nCSeq: " + itoa(n) + " OPTIONS\r\nContent-Length: 0\r\n\r\n"
		if _, err := c.Write([]byte(msg)); err != nil {
			return err
		}
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		for {
			k, err := c.Read(buf)
			if err != nil {
				break // the deadline, or an ICMP error before outpostd listens: probe again
			}
			if resp := string(buf[:k]); strings.HasPrefix(resp, "SIP/2.0 ") && strings.Contains(resp, id) {
				return nil
			}
		}
	}
}

var (
	challengeRE = regexp.MustCompile(`(?mi)^WWW-Authenticate:\s*(Digest\s.*)$`)
	statusRE    = regexp.MustCompile(`^SIP/2\.0 (\d{3})`)
)

// sipRegister registers user@domain at addr with its password, answering
// the digest challenge with sipauth (the one digest client).
func sipRegister(addr, user, password, domain string) error {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	callID, tag := randHex(8), randHex(4)
	local := c.LocalAddr().String()
	req := func(cseq int, auth string) string {
		return "REGISTER sip:" + domain + " SIP/2.0\r\n" +
			"Via: SIP/2.0/UDP " + local + ";branch=z9hG4bK" + randHex(8) + ";rport\r\n" +
			"Max-Forwards: 70\r\n" +
			"From: <sip:" + user + "@" + domain + ">;tag=" + tag + "\r\n" +
			"To: <sip:" + user + "@" + domain + ">\r\n" +
			"Call-ID: " + callID + "\r\n" +
			fmt.Sprintf("CSeq: %d REGISTER\r\n", cseq) +
			"Contact: <sip:" + user + "@" + local + ">\r\n" +
			"Expires: 3600\r\n" + auth +
			"User-Agent: outpost-image-test\r\nContent-Length: 0\r\n\r\n"
	}
	resp, err := sipExchange(c, req(1, ""), callID, 3*time.Second)
	if err != nil {
		return fmt.Errorf("REGISTER: %w", err)
	}
	if !strings.HasPrefix(resp, "SIP/2.0 401") {
		return fmt.Errorf("REGISTER without credentials: want 401, got %q", firstLine(resp))
	}
	var chals []string
	for _, m := range challengeRE.FindAllStringSubmatch(resp, -1) {
		chals = append(chals, strings.TrimSpace(m[1]))
	}
	dc := sipauth.Client{Username: user, Password: password}
	if _, err := dc.Challenge(401, chals); err != nil {
		return fmt.Errorf("REGISTER: %w in %q", err, resp)
	}
	name, value, err := dc.Authorization("REGISTER", "sip:"+domain)
	if err != nil {
		return fmt.Errorf("REGISTER: %w", err)
	}
	auth := name + ": " + value
	resp, err = sipExchange(c, req(2, auth+"\r\n"), callID, 3*time.Second)
	if err != nil {
		return fmt.Errorf("REGISTER with credentials: %w", err)
	}
	if m := statusRE.FindStringSubmatch(resp); m == nil || m[1] != "200" {
		return fmt.Errorf("REGISTER with credentials: want 200, got %q", firstLine(resp))
	}
	return nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\r\n")
	return l
}
