package relay

import (
	"bytes"
	"testing"
)

// TestHoldZeroAddressKeepsHoldersMedia: an RFC 2543 hold (c=0.0.0.0 with
// a=sendonly: "do not send to me", while the holder plays music on hold)
// stops media to the holder, not from it: its packets, from the address
// it signalled last, still reach the other leg under signalled latching.
func TestHoldZeroAddressKeepsHoldersMedia(t *testing.T) {
	r := newRelay(t, Config{})
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	s, toBoxA, toBoxB := call(t, r, pa, pb, []string{"0 PCMU"}, []string{"0 PCMU"})
	pa.send(toBoxA, 0, []byte{1})
	pb.recv()

	hold := bytes.Replace(pa.sdp(2, []string{"0 PCMU"}, "a=sendonly"), []byte("c=IN IP4 "+pa.addr().Addr().String()), []byte("c=IN IP4 0.0.0.0"), 1)
	if _, err := s.Offer(A, hold); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Answer(B, pb.sdp(2, []string{"0 PCMU"}, "a=recvonly")); err != nil {
		t.Fatal(err)
	}
	// Music on hold from A reaches B ...
	for i := range 3 {
		pa.send(toBoxA, 0, []byte{byte(10 + i)})
		if got := pb.recv(); got.payload[0] != byte(10+i) {
			t.Fatalf("B got %v during hold, want A's music", got.payload)
		}
	}
	if n := s.Stats()[A].Refused; n != 0 {
		t.Errorf("%d of A's packets refused during hold", n)
	}
	// ... and nothing goes to A.
	dropped := s.Stats()[B].Dropped
	pb.send(toBoxB, 0, []byte{3})
	waitFor(t, "B's packet dropped", func() bool { return s.Stats()[B].Dropped == dropped+1 })
}
