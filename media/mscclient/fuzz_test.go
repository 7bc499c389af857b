package mscclient

import (
	"testing"
)

func TestParseResponse(t *testing.T) {
	good := map[string]Response{
		`<mscmixer version="1.0" xmlns="urn:ietf:params:xml:ns:msc-mixer"><response status="200" reason="join successful"/></mscmixer>`: {200, "join successful"},
		`<mscmixer version="1.0"><response status="412"/></mscmixer>`:                                                                   {412, ""},
	}
	for in, want := range good {
		got, err := ParseResponse([]byte(in))
		if err != nil || got != want {
			t.Errorf("%s: %+v, %v", in, got, err)
		}
	}
	for _, in := range []string{
		"", "<mscmixer", `<mscmixer version="2.0"><response status="200"/></mscmixer>`,
		`<mscmixer version="1.0" xmlns="urn:other"><response status="200"/></mscmixer>`,
		`<mscmixer version="1.0"><auditresponse status="200"/></mscmixer>`,
		`<mscmixer version="1.0"><response status="2000"/></mscmixer>`,
		`<mscmixer version="1.0"><response status="abc"/></mscmixer>`,
		`<other version="1.0"><response status="200"/></other>`,
	} {
		if r, err := ParseResponse([]byte(in)); err == nil {
			t.Errorf("%q accepted: %+v", in, r)
		}
	}
	// MixerBody escapes what it is given.
	if b := string(MixerBody("join", `a"<`, "b")); b != `<mscmixer version="1.0" xmlns="urn:ietf:params:xml:ns:msc-mixer"><join id1="a&#34;&lt;" id2="b"/></mscmixer>` {
		t.Errorf("MixerBody: %s", b)
	}
}

func FuzzParseResponse(f *testing.F) {
	f.Add([]byte(`<mscmixer version="1.0" xmlns="urn:ietf:params:xml:ns:msc-mixer"><response status="200" reason="ok"/></mscmixer>`))
	f.Add([]byte(`<mscmixer version="1.0"><response status="412"/></mscmixer>`))
	f.Add([]byte(`<mscmixer version="1.0"><auditresponse status="200"><joinaudit id1="a:b" id2="c:d"/></auditresponse></mscmixer>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseResponse(b)
		if err == nil && (r.Status < 100 || r.Status > 999) {
			t.Fatalf("status %d accepted", r.Status)
		}
	})
}
