package images

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"
)

// The boot test's SIP client: just enough wire text to ask "is outpostd
// answering" (OPTIONS) and to leave a registration behind (REGISTER with
// an MD5 digest answer, RFC 3261 §22, RFC 7616 qop=auth). It cannot use
// the gateway's code (images imports only images/).

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
	challengeRE = regexp.MustCompile(`(?mi)^WWW-Authenticate:\s*Digest\s+(.*)$`)
	paramRE     = regexp.MustCompile(`(\w+)=("([^"]*)"|[^,\s]+)`)
	statusRE    = regexp.MustCompile(`^SIP/2\.0 (\d{3})`)
)

func md5hex(s string) string { h := md5.Sum([]byte(s)); return hex.EncodeToString(h[:]) }

// sipRegister registers user@domain at addr with its password, answering
// the MD5 challenge, and returns the final status line.
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
	var params map[string]string
	for _, m := range challengeRE.FindAllStringSubmatch(resp, -1) {
		p := map[string]string{}
		for _, kv := range paramRE.FindAllStringSubmatch(m[1], -1) {
			v := kv[2]
			if kv[3] != "" || strings.HasPrefix(v, `"`) {
				v = kv[3]
			}
			p[strings.ToLower(kv[1])] = v
		}
		if a := strings.ToUpper(p["algorithm"]); a == "" || a == "MD5" {
			params = p
			break
		}
	}
	if params == nil {
		return fmt.Errorf("REGISTER: no MD5 digest challenge in %q", resp)
	}
	uri := "sip:" + domain
	cnonce, nc := randHex(8), "00000001"
	ha1 := md5hex(user + ":" + params["realm"] + ":" + password)
	ha2 := md5hex("REGISTER:" + uri)
	response := md5hex(ha1 + ":" + params["nonce"] + ":" + nc + ":" + cnonce + ":auth:" + ha2)
	auth := fmt.Sprintf("Authorization: Digest username=\"%s\", realm=\"%s\", nonce=\"%s\", uri=\"%s\", response=\"%s\", algorithm=MD5, cnonce=\"%s\", qop=auth, nc=%s",
		user, params["realm"], params["nonce"], uri, response, cnonce, nc)
	if o := params["opaque"]; o != "" {
		auth += fmt.Sprintf(", opaque=\"%s\"", o)
	}
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
