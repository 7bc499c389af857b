package msr

import (
	"errors"
	"testing"
)

func FuzzParseMixer(f *testing.F) {
	f.Add([]byte(`<mscmixer version="1.0" xmlns="urn:ietf:params:xml:ns:msc-mixer"><join id1="a:b" id2="c:d"/></mscmixer>`))
	f.Add([]byte(`<mscmixer version="1.0"><modifyjoin id1="a:b" id2="c:d"><stream media="audio" direction="sendonly"/></modifyjoin></mscmixer>`))
	f.Add([]byte(`<mscmixer version="1.0"><unjoin id1="a:b" id2="c:d"/></mscmixer>`))
	f.Add([]byte(`<mscmixer version="1.0"><audit capabilities="false"/></mscmixer>`))
	f.Add([]byte(`<mscmixer version="1.0"><createconference/></mscmixer>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		op, err := parseMixer(b)
		if err != nil {
			var me *errMix
			if !errors.As(err, &me) || me.status < 400 || me.status > 499 {
				t.Fatalf("error %v is not a package status", err)
			}
			return
		}
		switch op.kind {
		case "audit":
		case "join", "modifyjoin", "unjoin":
			if op.id1 == "" || op.id2 == "" || op.dir == "" {
				t.Fatalf("op %+v", op)
			}
		default:
			t.Fatalf("kind %q", op.kind)
		}
	})
}

func TestParseMixer(t *testing.T) {
	for _, c := range []struct {
		body   string
		status int
		dir    Direction
	}{
		{`<mscmixer version="1.0"><join id1="a:b" id2="c:d"/></mscmixer>`, 0, SendRecv},
		{`<mscmixer version="1.0"><modifyjoin id1="a:b" id2="c:d"><stream media="audio" direction="inactive"/></modifyjoin></mscmixer>`, 0, Inactive},
		{`<mscmixer version="2.0"><join id1="a:b" id2="c:d"/></mscmixer>`, 400, ""},
		{`<mscmixer version="1.0" xmlns="urn:other"><join id1="a:b" id2="c:d"/></mscmixer>`, 400, ""},
		{`<mscmixer version="1.0"><join id1="a:b" id2="c:d"><stream media="audio" direction="up"/></join></mscmixer>`, 400, ""},
		{`<mscmixer version="1.0"><createconference/></mscmixer>`, 422, ""},
		{`<mscmixer version="1.0"></mscmixer>`, 400, ""},
	} {
		op, err := parseMixer([]byte(c.body))
		var me *errMix
		switch {
		case c.status == 0 && (err != nil || op.dir != c.dir):
			t.Errorf("%s: %+v %v", c.body, op, err)
		case c.status != 0 && (!errors.As(err, &me) || me.status != c.status):
			t.Errorf("%s: %v, want %d", c.body, err, c.status)
		}
	}
}
