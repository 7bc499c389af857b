package digest

import (
	"errors"
	"strings"
	"testing"
)

func TestParseCredentials(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Credentials
	}{
		{
			name: "RFC 3261 §20.7",
			in: "Digest username=\"Alice\", realm=\"atlanta.com\",\r\n" +
				" nonce=\"84a4cc6f3082121f32b42a2187831a9e\",\r\n" +
				" response=\"7587245234b3434cc3412213e5f113a5432\"",
			want: Credentials{Username: "Alice", Realm: "atlanta.com", Nonce: "84a4cc6f3082121f32b42a2187831a9e",
				Response: "7587245234b3434cc3412213e5f113a5432"},
		},
		{
			name: "RFC 3665 §2.1 F3 style (empty opaque, unquoted algorithm)",
			in: `Digest username="bob", realm="biloxi.com", nonce="dc3a5ab2530aa93112cf5904ba7d88fa", ` +
				`uri="sip:biloxi.com", response="702138b27d869ac8741e10ec643d55be", ` +
				`opaque="", algorithm=MD5`,
			want: Credentials{Username: "bob", Realm: "biloxi.com", Nonce: "dc3a5ab2530aa93112cf5904ba7d88fa",
				URI: "sip:biloxi.com", Response: "702138b27d869ac8741e10ec643d55be", Algorithm: "MD5"},
		},
		{
			name: "RFC 7616 §3.9.1 SHA-256",
			in: "Digest username=\"Mufasa\",\n" +
				"    realm=\"http-auth@example.org\",\n" +
				"    uri=\"/dir/index.html\",\n" +
				"    algorithm=SHA-256,\n" +
				"    nonce=\"7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v\",\n" +
				"    nc=00000001,\n" +
				"    cnonce=\"f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ\",\n" +
				"    qop=auth,\n" +
				"    response=\"753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1\",\n" +
				"    opaque=\"FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS\"",
			want: Credentials{Username: "Mufasa", Realm: "http-auth@example.org", URI: "/dir/index.html",
				Algorithm: "SHA-256", Nonce: "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", NC: "00000001",
				Cnonce: "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ", QOP: "auth",
				Response: "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1",
				Opaque:   "FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS"},
		},
		{
			name: "SIPp style, no spaces",
			in: `Digest username="user0001",realm="bench.local",cnonce="6b8b4567",nc=00000001,qop=auth,` +
				`uri="sip:127.0.0.51:5060",nonce="AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",` +
				`response="0123456789abcdef0123456789abcdef",algorithm=MD5`,
			want: Credentials{Username: "user0001", Realm: "bench.local", Cnonce: "6b8b4567", NC: "00000001",
				QOP: "auth", URI: "sip:127.0.0.51:5060", Nonce: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
				Response: "0123456789abcdef0123456789abcdef", Algorithm: "MD5"},
		},
		{
			name: "case-insensitive scheme and keys, quoted qop and nc",
			in:   `dIgEsT USERNAME="u", Realm="r", QOP="auth", NC="00000002", Nonce=n`,
			want: Credentials{Username: "u", Realm: "r", QOP: "auth", NC: "00000002", Nonce: "n"},
		},
		{
			name: "quoted comma and equals",
			in:   `Digest username="a,b=c", realm="x, y"`,
			want: Credentials{Username: "a,b=c", Realm: "x, y"},
		},
		{
			name: "escaped quotes and backslash",
			in:   `Digest username="say \"hi\" \\o/", realm="r\e"`,
			want: Credentials{Username: `say "hi" \o/`, Realm: "re"},
		},
		{
			name: "whitespace around = and , and tabs",
			in:   "  Digest\tusername =\t\"u\" ,realm= \"r\"\t,  uri = \"sip:x\"  ",
			want: Credentials{Username: "u", Realm: "r", URI: "sip:x"},
		},
		{
			name: "empty list elements and trailing comma",
			in:   `Digest , username="u",, realm="r",`,
			want: Credentials{Username: "u", Realm: "r"},
		},
		{
			name: "unknown params ignored, may repeat",
			in:   `Digest foo=bar, username="u", foo="baz", userhash=false`,
			want: Credentials{Username: "u"},
		},
		{
			name: "unquoted sloppy uri",
			in:   `Digest uri=sip:alice@example.com:5060;transport=udp, username=alice`,
			want: Credentials{URI: "sip:alice@example.com:5060;transport=udp", Username: "alice"},
		},
		{
			name: "empty quoted values",
			in:   `Digest username="", opaque=""`,
			want: Credentials{},
		},
		{
			name: "UTF-8 username",
			in:   `Digest username="Jürgen", realm="r"`,
			want: Credentials{Username: "Jürgen", Realm: "r"},
		},
		{
			name: "missing fields are not a parse error",
			in:   `Digest username="u"`,
			want: Credentials{Username: "u"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCredentials(tt.in)
			if err != nil {
				t.Fatalf("ParseCredentials(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseCredentials(%q)\n got %+v\nwant %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseCredentialsErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"empty", "", ErrMalformed},
		{"blank", "   \t", ErrMalformed},
		{"missing scheme", `username="u", realm="r"`, ErrMalformed},
		{"basic scheme", `Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==`, ErrNotDigest},
		{"bearer scheme", `Bearer abc`, ErrNotDigest},
		{"scheme prefix only", `Digestive username="u"`, ErrNotDigest},
		{"scheme glued to param", `Digest,username="u"`, ErrMalformed},
		{"scheme only", `Digest`, ErrMalformed},
		{"scheme and blanks", `Digest   `, ErrMalformed},
		{"scheme and commas", `Digest , ,`, ErrMalformed},
		{"missing equals", `Digest username "u"`, ErrMalformed},
		{"missing value", `Digest username=`, ErrMalformed},
		{"missing value before comma", `Digest username=, realm="r"`, ErrMalformed},
		{"missing comma", `Digest username="u" realm="r"`, ErrMalformed},
		{"missing comma after token", `Digest nc=00000001 qop=auth`, ErrMalformed},
		{"unterminated quote", `Digest username="u, realm="r`, ErrMalformed},
		{"unterminated after escape", `Digest username="u\`, ErrMalformed},
		{"escaped closing quote", `Digest username="u\"`, ErrMalformed},
		{"garbage after quoted", `Digest username="u"x, realm="r"`, ErrMalformed},
		{"bad param name", `Digest "username"="u"`, ErrMalformed},
		{"equals first", `Digest =u`, ErrMalformed},
		{"NUL in quoted", "Digest username=\"u\x00\"", ErrMalformed},
		{"CRLF in quoted", "Digest username=\"u\r\nX-Evil: 1\"", ErrMalformed},
		{"escaped CR", "Digest username=\"u\\\r\"", ErrMalformed},
		{"invalid UTF-8", "Digest username=\"\xff\xfe\"", ErrMalformed},
		{"invalid UTF-8 with escape", "Digest username=\"\\a\xff\"", ErrMalformed},
		{"non-ASCII bare value", "Digest username=J\xc3\xbcrgen", ErrMalformed},
		{"duplicate nonce", `Digest nonce="a", nonce="b"`, ErrMalformed},
		{"duplicate key different case", `Digest Response="a", RESPONSE="a"`, ErrMalformed},
		{"binary garbage", "\x00\x01\x02\xff", ErrMalformed},
		{"only quote", `"`, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseCredentials(tt.in)
			if err == nil {
				t.Fatalf("ParseCredentials(%q) = %+v, want error", tt.in, c)
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("ParseCredentials(%q) error %v, want wrapping %v", tt.in, err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "gateway/digest: ") {
				t.Errorf("error %q does not name the package", err)
			}
			if c != (Credentials{}) {
				t.Errorf("ParseCredentials(%q) returned partial credentials %+v with error", tt.in, c)
			}
		})
	}
}

func TestParseCredentialsAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	in := `Digest username="user0001",realm="bench.local",cnonce="6b8b4567",nc=00000001,qop=auth,` +
		`uri="sip:127.0.0.51:5060",nonce="AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",` +
		`response="0123456789abcdef0123456789abcdef",algorithm=MD5`
	var sink Credentials
	if n := testing.AllocsPerRun(100, func() { sink, _ = ParseCredentials(in) }); n != 0 {
		t.Errorf("ParseCredentials allocates %v times, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseCredentials("Digest username=\"u\x00") }); n != 0 {
		t.Errorf("ParseCredentials error path allocates %v times, want 0", n)
	}
	_ = sink
}
