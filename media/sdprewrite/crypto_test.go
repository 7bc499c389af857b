package sdprewrite

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// A 30-byte AES-CM key||salt and a 28-byte GCM one, base64.
const (
	key30 = "WVNfX19zZW1jdGwgKCkgewkyMjA7fQp9CnVubGVz"
	key28 = "MTIzNDU2Nzg5MDEyMzQ1Njc4OTAxMjM0NTY3OA=="
)

func TestParseCrypto(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    error
		suite   string
		life    string
		keySize int
	}{
		{"1 AES_CM_128_HMAC_SHA1_80 inline:" + key30, nil, SuiteAES80, "", 30},
		{"2 AES_CM_128_HMAC_SHA1_32 inline:" + key30 + "|2^20", nil, SuiteAES32, "2^20", 30},
		{"3 AEAD_AES_128_GCM inline:" + key28, nil, SuiteGCM128, "", 28},
		{"1 AES_CM_128_HMAC_SHA1_80 INLINE:" + strings.TrimRight(key30, "="), nil, SuiteAES80, "", 30},
		{"1 AES_CM_128_HMAC_SHA1_80 inline:" + key30 + "|2^20|1:4", ErrCryptoMKI, "", "", 0},
		{"1 AES_CM_128_HMAC_SHA1_80 inline:" + key30 + "|1:4", ErrCryptoMKI, "", "", 0},
		{"1 AES_CM_128_HMAC_SHA1_80 inline:" + key30 + ";inline:" + key30, ErrCryptoKeys, "", "", 0},
		{"1 AES_CM_128_HMAC_SHA1_80 inline:" + key30 + " KDR=1", ErrCryptoSession, "", "", 0},
		{"1 AES_256_CM_HMAC_SHA1_80 inline:" + key30, ErrCryptoSuite, "", "", 0},
		{"1 AES_CM_128_HMAC_SHA1_80 inline:" + key28, ErrCryptoKey, "", "", 0},
		{"1 AES_CM_128_HMAC_SHA1_80 inline:!!!", ErrCryptoSyntax, "", "", 0},
		{"x AES_CM_128_HMAC_SHA1_80 inline:" + key30, ErrCryptoSyntax, "", "", 0},
		{"1 AES_CM_128_HMAC_SHA1_80 uri:" + key30, ErrCryptoSyntax, "", "", 0},
		{"1 AES_CM_128_HMAC_SHA1_80 inline:" + key30 + "|2^x", ErrCryptoSyntax, "", "", 0},
		{"1 AES_CM_128_HMAC_SHA1_80", ErrCryptoSyntax, "", "", 0},
	} {
		c, err := ParseCrypto(tc.in)
		if !errors.Is(err, tc.want) {
			t.Errorf("%q: err %v, want %v", tc.in, err, tc.want)
			continue
		}
		if err != nil {
			if strings.Contains(err.Error(), key30[:8]) || strings.Contains(err.Error(), key28[:8]) {
				t.Errorf("%q: error shows key material: %v", tc.in, err)
			}
			continue
		}
		if c.Suite != tc.suite || c.Lifetime != tc.life || len(c.Key) != tc.keySize {
			t.Errorf("%q: %+v", tc.in, c)
		}
		if strings.Contains(c.String(), key30[:8]) || strings.Contains(c.String(), key28[:8]) {
			t.Errorf("String shows the key: %s", c)
		}
		back, err := ParseCrypto(c.Line())
		if err != nil || !bytes.Equal(back.Key, c.Key) || back.Tag != c.Tag || back.Suite != c.Suite {
			t.Errorf("%q: Line %q does not read back: %v", tc.in, c.Line(), err)
		}
	}
}

const savpOffer = "v=0\r\no=- 1 1 IN IP4 192.0.2.1\r\ns=-\r\nc=IN IP4 192.0.2.1\r\nt=0 0\r\n" +
	"m=audio 4000 RTP/SAVP 0 8\r\na=rtpmap:0 PCMU/8000\r\n" +
	"a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:" + key30 + "|2^31\r\n" +
	"a=crypto:2 AES_CM_128_HMAC_SHA1_80 inline:" + key30 + "|2^31|1:1\r\n" +
	"a=crypto:3 AEAD_AES_128_GCM inline:" + key28 + "\r\n" +
	"m=video 4002 RTP/SAVP 96\r\na=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:" + key30 + "\r\n"

func TestCryptoRewrite(t *testing.T) {
	s, err := Parse([]byte(savpOffer))
	if err != nil {
		t.Fatal(err)
	}
	if s.Audio.Proto != "RTP/SAVP" || s.Audio.CryptoLines != 3 || len(s.Audio.Crypto) != 2 ||
		s.Audio.Crypto[0].Tag != 1 || s.Audio.Crypto[1].Suite != SuiteGCM128 {
		t.Fatalf("audio %+v", s.Audio)
	}
	base := Params{Addr: netip.MustParseAddr("198.18.0.1"), Port: 30000, Codecs: []Codec{{PT: 0, Name: "PCMU", Rate: 8000}}}
	// Towards a plain leg: no crypto at all in the audio section, RTP/AVP.
	p := base
	p.Proto = Profile(s.Audio.Proto, false)
	plain := string(s.Rewrite(p))
	audio, _, _ := strings.Cut(plain, "m=video")
	if strings.Contains(audio, "a=crypto") || !strings.Contains(plain, "m=audio 30000 RTP/AVP 0\r\n") {
		t.Fatalf("plain rewrite:\n%s", plain)
	}
	// Towards an SRTP leg: the box's own line only.
	own := Crypto{Tag: 1, Suite: SuiteAES32, Key: bytes.Repeat([]byte{7}, 30)}
	p = base
	p.Proto, p.Crypto = "RTP/SAVP", []Crypto{own}
	sec := s.Rewrite(p)
	back, err := Parse(sec)
	if err != nil {
		t.Fatal(err)
	}
	if back.Audio.Proto != "RTP/SAVP" || back.Audio.CryptoLines != 1 || !bytes.Equal(back.Audio.Crypto[0].Key, own.Key) {
		t.Fatalf("secure rewrite:\n%s", sec)
	}
	if strings.Contains(string(sec), key30[:8]+"") && strings.Index(string(sec), key30[:8]) < strings.Index(string(sec), "m=video") {
		t.Fatalf("the sender's key leaks into the audio section:\n%s", sec)
	}
}

// FuzzParseCrypto: ParseCrypto never panics, what it accepts is a
// supported suite with a key of the suite's length, Line reads back to
// the same value, and its errors never quote the key. Seeds:
// testdata/fuzz/FuzzParseCrypto.
func FuzzParseCrypto(f *testing.F) {
	f.Add("1 AES_CM_128_HMAC_SHA1_80 inline:" + key30 + "|2^20")
	f.Fuzz(func(t *testing.T, v string) {
		c, err := ParseCrypto(v)
		if err != nil {
			if _, info, ok := strings.Cut(v, "inline:"); ok && len(info) >= 16 && strings.Contains(err.Error(), info[:16]) {
				t.Fatalf("error quotes key material: %v", err)
			}
			return
		}
		if SuiteKeyLen(c.Suite) != len(c.Key) {
			t.Fatalf("%q: suite %s with %d key bytes", v, c.Suite, len(c.Key))
		}
		back, err := ParseCrypto(c.Line())
		if err != nil || back.Tag != c.Tag || back.Suite != c.Suite || !bytes.Equal(back.Key, c.Key) || back.Lifetime != c.Lifetime {
			t.Fatalf("%q → %q: %+v, %v", v, c.Line(), back, err)
		}
	})
}
