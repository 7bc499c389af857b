package firmware

import (
	"net"
	"strings"
	"testing"
)

// newSIPEcho answers every request with a 200 that copies its Call-ID,
// like a registrar answering OPTIONS; it stops with the test.
func newSIPEcho(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		pc.Close()
		<-done
	})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			callID := ""
			for _, l := range strings.Split(string(buf[:n]), "\r\n") {
				if v, ok := strings.CutPrefix(l, "Call-ID: "); ok {
					callID = v
				}
			}
			pc.WriteTo([]byte("SIP/2.0 200 OK\r\nCall-ID: "+callID+"\r\nContent-Length: 0\r\n\r\n"), from)
		}
	}()
	return pc.LocalAddr().String()
}
