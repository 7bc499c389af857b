package images

import (
	"net"
	"regexp"
	"strings"
	"testing"

	"github.com/icholy/digest"
)

// TestSIPRegister runs the boot test's REGISTER against a loopback
// registrar that offers SHA-256 before MD5 and checks the answer.
func TestSIPRegister(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	chal := &digest.Challenge{Realm: "outpost.local", Nonce: "n-1", QOP: []string{"auth"}, Algorithm: "SHA-256"}
	header := regexp.MustCompile(`(?mi)^(Call-ID|Authorization):\s*(.*?)\r$`)
	served := make(chan string, 2)
	go func() {
		buf := make([]byte, 65535)
		for range 2 {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			h := map[string]string{}
			for _, m := range header.FindAllStringSubmatch(string(buf[:n]), -1) {
				h[strings.ToLower(m[1])] = m[2]
			}
			status := "401 Unauthorized\r\nWWW-Authenticate: " + chal.String() +
				"\r\nWWW-Authenticate: Digest realm=\"outpost.local\", nonce=\"n-2\", qop=\"auth\", algorithm=MD5"
			if a := h["authorization"]; a != "" {
				status = "403 Forbidden"
				cr, err := digest.ParseCredentials(a)
				if err == nil {
					want, err := digest.Digest(chal, digest.Options{Method: "REGISTER", URI: cr.URI, Username: "1001", Password: "pw", Cnonce: cr.Cnonce, Count: cr.Nc})
					if err == nil && cr.URI == "sip:outpost.local" && cr.Response == want.Response {
						status = "200 OK"
					}
				}
			}
			served <- status
			pc.WriteTo([]byte("SIP/2.0 "+status+"\r\nCall-ID: "+h["call-id"]+"\r\nContent-Length: 0\r\n\r\n"), from)
		}
	}()
	if err := sipRegister(pc.LocalAddr().String(), "1001", "pw", "outpost.local"); err != nil {
		t.Fatal(err)
	}
	if first, second := <-served, <-served; !strings.HasPrefix(first, "401") || second != "200 OK" {
		t.Fatalf("served %q then %q", first, second)
	}
}
