package appliance

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/outpost/outpost/appliance/config"
	"github.com/outpost/outpost/media/relay"
	"github.com/outpost/outpost/media/sdprewrite"
)

// TestAnchorSRTPPerRoute: media.srtp applies to leg A and to leg B of a
// route without an override; media.srtp_routes to leg B by the route the
// B2BUA passes to SetRoute before the first offer.
func TestAnchorSRTPPerRoute(t *testing.T) {
	d := &config.Document{Media: config.Media{SRTP: "offer", SRTPRoutes: map[string]string{"hq": "require", "pstn": "off"}}}
	pol := anchorPolicyOf(d)
	if !pol.Always || pol.SRTP != relay.SRTPOffer || pol.SRTPRoutes["hq"] != relay.SRTPRequire || pol.SRTPRoutes["pstn"] != relay.SRTPOff {
		t.Fatalf("policy %+v", pol)
	}
	if p := anchorPolicyOf(&config.Document{}); p.Always || p.SRTP != relay.SRTPOff || p.SRTPRoutes != nil {
		t.Fatalf("default policy %+v", p)
	}
	next := &partConfigs{Relay: relay.Config{PortMin: 49000, PortMax: 49199}, Anchor: pol}
	m, err := newMediaPart(next, func() []int { return nil }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.run(ctx) }()
	defer func() { cancel(); <-done }()

	local := netip.MustParseAddr("127.0.0.1")
	plain := []byte("v=0\r\no=p 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 40000 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n")
	for _, tc := range []struct {
		route         string
		wantSAVP      bool // the box offers SRTP to leg B
		plainAnswerOK bool
	}{
		{"hq", true, false},   // require: a plain answer is 488
		{"pstn", false, true}, // off: plain offered
		{"local", true, true}, // no override: media.srtp offer
	} {
		an, err := m.anchor("call-"+tc.route, local, local, func(string) {})
		if err != nil || an == nil {
			t.Fatalf("%s: anchor %v, %v", tc.route, an, err)
		}
		an.(interface{ SetRoute(string) }).SetRoute(tc.route)
		toB, err := an.Offer(0, plain)
		if err != nil {
			t.Fatalf("%s: offer: %v", tc.route, err)
		}
		s, _ := sdprewrite.Parse(toB)
		if got := sdprewrite.IsSecure(s.Audio.Proto); got != tc.wantSAVP || got != (len(s.Audio.Crypto) == 3) {
			t.Errorf("%s: offer to B is %s with %d a=crypto", tc.route, s.Audio.Proto, len(s.Audio.Crypto))
		}
		ans := strings.Replace(string(plain), "o=p 1 1", "o=q 2 1", 1)
		_, err = an.Answer(1, []byte(ans))
		if (err == nil) != tc.plainAnswerOK {
			t.Errorf("%s: plain answer: %v", tc.route, err)
		}
		var st interface{ SIPStatus() int }
		if err != nil && (!errors.As(err, &st) || st.SIPStatus() != 488) {
			t.Errorf("%s: refusal %v does not carry 488", tc.route, err)
		}
		an.Close()
	}
}
