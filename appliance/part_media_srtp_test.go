package appliance

import (
	"context"
	"encoding/base64"
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
	m := runMediaPart(t, next)

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

// TestAnchorMediaProtection: the calls API (liveStats) and the CDR
// (takeStats) name each leg's protection — the SDES suite of an SRTP leg,
// "rtp" for a plain one — and never carry key material.
func TestAnchorMediaProtection(t *testing.T) {
	d := &config.Document{Media: config.Media{SRTPRoutes: map[string]string{"hq": "require"}}}
	next := &partConfigs{Relay: relay.Config{PortMin: 49200, PortMax: 49399}, Anchor: anchorPolicyOf(d)}
	m := runMediaPart(t, next)

	local := netip.MustParseAddr("127.0.0.1")
	an, err := m.anchor("call-srtp", local, local, func(string) {})
	if err != nil || an == nil {
		t.Fatalf("anchor %v, %v", an, err)
	}
	an.(interface{ SetRoute(string) }).SetRoute("hq")
	plain := []byte("v=0\r\no=p 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 40000 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n")
	toB, err := an.Offer(0, plain)
	if err != nil {
		t.Fatal(err)
	}
	offer, err := sdprewrite.Parse(toB)
	if err != nil || len(offer.Audio.Crypto) == 0 {
		t.Fatalf("offer to B has no a=crypto: %v\n%s", err, toB)
	}
	// B answers SRTP with the first suite offered and a key of its own.
	c := offer.Audio.Crypto[0]
	c.Key = []byte(strings.Repeat("k", len(c.Key)))
	ans := "v=0\r\no=q 2 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 41000 RTP/SAVP 0\r\na=rtpmap:0 PCMU/8000\r\na=crypto:" + c.Line() + "\r\n"
	if _, err := an.Answer(1, []byte(ans)); err != nil {
		t.Fatalf("SRTP answer: %v", err)
	}
	live, _ := m.liveStats("call-srtp")
	if live == nil || live[0].Protection != "rtp" || live[1].Protection != "srtp:"+c.Suite {
		t.Fatalf("live media %+v, want rtp / srtp:%s", live, c.Suite)
	}
	an.Close()
	js := m.takeStats("call-srtp")
	if !strings.Contains(js, `"protection":"rtp"`) || !strings.Contains(js, `"protection":"srtp:`+c.Suite+`"`) {
		t.Errorf("CDR media %s lacks the protection of each leg", js)
	}
	for _, key := range [][]byte{c.Key, offer.Audio.Crypto[0].Key} {
		if strings.Contains(js, string(key)) || strings.Contains(js, base64.StdEncoding.EncodeToString(key)) {
			t.Errorf("CDR media %s carries key material", js)
		}
	}
}

// TestAnchorSRTPPerInterface: media.srtp_interfaces sets a leg's policy by
// the interface holding the box's address on that leg; a route's entry in
// media.srtp_routes wins for leg B; legs on other interfaces take
// media.srtp (route > interface > global).
func TestAnchorSRTPPerInterface(t *testing.T) {
	d := &config.Document{Media: config.Media{SRTPInterfaces: map[string]string{"lan0": "require"}, SRTPRoutes: map[string]string{"pstn": "off"}}}
	pol := anchorPolicyOf(d)
	if !pol.Always || pol.SRTP != relay.SRTPOff || pol.SRTPInterfaces["lan0"] != relay.SRTPRequire {
		t.Fatalf("policy %+v", pol)
	}
	next := &partConfigs{Relay: relay.Config{PortMin: 49400, PortMax: 49599}, Anchor: pol}
	m, err := newMediaPart(next, func() []int { return nil }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	lan, wan := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	m.ifaceOf = func(ip netip.Addr) string {
		switch ip {
		case lan:
			return "lan0"
		case wan:
			return "wan0"
		}
		return ""
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.run(ctx) }()
	defer func() { cancel(); <-done }()

	plain := []byte("v=0\r\no=p 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 40000 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n")
	for _, tc := range []struct {
		name      string
		a, b      netip.Addr
		route     string
		offerOK   bool // leg A's plain offer is taken
		wantSAVP  bool // the box offers SRTP to leg B
		plainAnsB bool // leg B's plain answer is taken
	}{
		{"A on lan0 requires SRTP", lan, wan, "local", false, false, false},
		{"B on lan0 requires SRTP", wan, lan, "local", true, true, false},
		{"route beats interface", wan, lan, "pstn", true, false, true},
		{"no entry: media.srtp off", wan, wan, "hq", true, false, true},
	} {
		an, err := m.anchor("call-"+tc.name, tc.a, tc.b, func(string) {})
		if err != nil || an == nil {
			t.Fatalf("%s: anchor %v, %v", tc.name, an, err)
		}
		an.(interface{ SetRoute(string) }).SetRoute(tc.route)
		toB, err := an.Offer(0, plain)
		if (err == nil) != tc.offerOK {
			t.Errorf("%s: plain offer from A: %v", tc.name, err)
		}
		if err == nil {
			s, _ := sdprewrite.Parse(toB)
			if got := sdprewrite.IsSecure(s.Audio.Proto); got != tc.wantSAVP {
				t.Errorf("%s: offer to B is %s", tc.name, s.Audio.Proto)
			}
			ans := strings.Replace(string(plain), "o=p 1 1", "o=q 2 1", 1)
			if _, err := an.Answer(1, []byte(ans)); (err == nil) != tc.plainAnsB {
				t.Errorf("%s: plain answer from B: %v", tc.name, err)
			}
		}
		an.Close()
	}
}

// runMediaPart starts a media part on next until the test ends.
func runMediaPart(t *testing.T, next *partConfigs) *mediaPart {
	t.Helper()
	m, err := newMediaPart(next, func() []int { return nil }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return m
}
