package msr

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The RFC 6505 mixer control package, as far as this MSR serves it: join,
// modifyjoin, unjoin between two connections, and audit of the joins.
const (
	mixerPackage     = "msc-mixer/1.0"
	mixerNamespace   = "urn:ietf:params:xml:ns:msc-mixer"
	mixerContentType = "application/msc-mixer+xml"
	maxMixerBody     = 16 << 10
)

// RFC 6505 §4.6 status codes used here.
const (
	mixOK             = 200
	mixSyntax         = 400 // not valid against the schema
	mixNoConference   = 406 // conference does not exist (no conferences here)
	mixIncompatible   = 407 // incompatible stream configuration
	mixAlreadyJoined  = 408
	mixNotJoined      = 409
	mixJoinFailed     = 411 // unable to perform join mixer operation
	mixNoConnection   = 412 // connection does not exist
	mixUnsupported    = 422 // unsupported media stream configuration
	mixOtherExecution = 419
)

// mixRequest is an <mscmixer> request; exactly one element is set.
type mixRequest struct {
	XMLName    xml.Name  `xml:"mscmixer"`
	Version    string    `xml:"version,attr"`
	Join       *mixJoin  `xml:"join"`
	ModifyJoin *mixJoin  `xml:"modifyjoin"`
	Unjoin     *mixJoin  `xml:"unjoin"`
	Audit      *mixAudit `xml:"audit"`
	Other      []anyElem `xml:",any"`
}

type mixJoin struct {
	ID1     string      `xml:"id1,attr"`
	ID2     string      `xml:"id2,attr"`
	Streams []mixStream `xml:"stream"`
	Other   []anyElem   `xml:",any"`
}

type mixStream struct {
	Media     string `xml:"media,attr"`
	Direction string `xml:"direction,attr"`
}

type mixAudit struct {
	Capabilities string `xml:"capabilities,attr"`
	Mixers       string `xml:"mixers,attr"`
	MixerID      string `xml:"mixerid,attr"`
}

type anyElem struct{ XMLName xml.Name }

// op is a parsed request: what to do, between which ids, which way.
type mixOp struct {
	kind     string // join, modifyjoin, unjoin, audit
	id1, id2 string
	dir      Direction
	audit    mixAudit
}

// errMix is a refusal with its RFC 6505 status.
type errMix struct {
	status int
	reason string
}

func (e *errMix) Error() string { return fmt.Sprintf("%d %s", e.status, e.reason) }

func mixErr(status int, format string, a ...any) error {
	return &errMix{status, fmt.Sprintf(format, a...)}
}

// parseMixer reads an msc-mixer request body. Errors are *errMix.
func parseMixer(body []byte) (mixOp, error) {
	if len(body) == 0 {
		return mixOp{}, mixErr(mixSyntax, "empty body")
	}
	if len(body) > maxMixerBody {
		return mixOp{}, mixErr(mixSyntax, "body larger than %d bytes", maxMixerBody)
	}
	var r mixRequest
	d := xml.NewDecoder(bytes.NewReader(body))
	d.Strict = true
	if err := d.Decode(&r); err != nil {
		return mixOp{}, mixErr(mixSyntax, "XML: %v", shorten(err.Error()))
	}
	if r.XMLName.Space != "" && r.XMLName.Space != mixerNamespace {
		return mixOp{}, mixErr(mixSyntax, "namespace %q", shorten(r.XMLName.Space))
	}
	if r.Version != "1.0" {
		return mixOp{}, mixErr(mixSyntax, "version %q", shorten(r.Version))
	}
	var op mixOp
	n := 0
	for _, c := range []struct {
		kind string
		j    *mixJoin
	}{{"join", r.Join}, {"modifyjoin", r.ModifyJoin}, {"unjoin", r.Unjoin}} {
		if c.j == nil {
			continue
		}
		n++
		op = mixOp{kind: c.kind, id1: c.j.ID1, id2: c.j.ID2, dir: SendRecv}
		if op.id1 == "" || op.id2 == "" {
			return mixOp{}, mixErr(mixSyntax, "%s needs id1 and id2", c.kind)
		}
		if len(c.j.Other) > 0 {
			return mixOp{}, mixErr(mixUnsupported, "%s: element <%s> not supported", c.kind, shorten(c.j.Other[0].XMLName.Local))
		}
		if c.kind == "unjoin" && len(c.j.Streams) > 0 {
			return mixOp{}, mixErr(mixUnsupported, "unjoin of single streams not supported")
		}
		for _, s := range c.j.Streams {
			if s.Media != "audio" {
				return mixOp{}, mixErr(mixUnsupported, "media %q not supported (audio only)", shorten(s.Media))
			}
			switch Direction(s.Direction) {
			case "":
			case SendRecv, SendOnly, RecvOnly, Inactive:
				op.dir = Direction(s.Direction)
			default:
				return mixOp{}, mixErr(mixSyntax, "direction %q", shorten(s.Direction))
			}
		}
		if len(c.j.Streams) > 1 {
			return mixOp{}, mixErr(mixIncompatible, "more than one audio stream")
		}
	}
	if r.Audit != nil {
		n++
		op = mixOp{kind: "audit", audit: *r.Audit}
	}
	if len(r.Other) > 0 {
		return mixOp{}, mixErr(mixUnsupported, "element <%s> not supported", shorten(r.Other[0].XMLName.Local))
	}
	if n != 1 {
		return mixOp{}, mixErr(mixSyntax, "%d request elements, want exactly one", n)
	}
	return op, nil
}

func shorten(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// mixer answers one CONTROL body of the msc-mixer package with the
// package's response body.
func (ms *mediaServer) mixer(body []byte) []byte {
	op, err := parseMixer(body)
	if err == nil {
		if op.kind == "audit" {
			return ms.audit(op.audit)
		}
		err = ms.execute(op)
	}
	status, reason := mixOK, op.kind+" successful"
	var me *errMix
	if errors.As(err, &me) {
		status, reason = me.status, me.reason
	} else if err != nil {
		status, reason = mixOtherExecution, err.Error()
	}
	return mixResponse(status, reason)
}

func mixResponse(status int, reason string) []byte {
	var b bytes.Buffer
	b.WriteString(`<mscmixer version="1.0" xmlns="` + mixerNamespace + `"><response status="`)
	fmt.Fprint(&b, status)
	b.WriteString(`" reason="`)
	_ = xml.EscapeText(&b, []byte(reason))
	b.WriteString(`"/></mscmixer>`)
	return b.Bytes()
}

// execute applies a join, modifyjoin or unjoin.
func (ms *mediaServer) execute(op mixOp) error {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	var cs [2]*connection
	for i, id := range []string{op.id1, op.id2} {
		if !strings.Contains(id, ":") {
			return mixErr(mixNoConference, "conference %q does not exist (no conferences on this MSR)", shorten(id))
		}
		if cs[i] = ms.lookup(id); cs[i] == nil {
			return mixErr(mixNoConnection, "connection %q does not exist", shorten(id))
		}
	}
	c1, c2 := cs[0], cs[1]
	if c1 == c2 {
		return mixErr(mixIncompatible, "cannot join a connection to itself")
	}
	joined := c1.peer == c2
	switch op.kind {
	case "join":
		if joined {
			return mixErr(mixAlreadyJoined, "already joined")
		}
		if c1.peer != nil || c2.peer != nil {
			return mixErr(mixJoinFailed, "a connection is already joined to another (no mixing of more than two)")
		}
		c1.peer, c2.peer = c2, c1
	case "modifyjoin", "unjoin":
		if !joined {
			return mixErr(mixNotJoined, "not joined")
		}
	}
	if op.kind == "unjoin" {
		c1.mc.ForwardTo(nil)
		c2.mc.ForwardTo(nil)
		c1.peer, c2.peer, c1.dir, c2.dir = nil, nil, "", ""
		return nil
	}
	c1.dir, c2.dir = op.dir, reverse(op.dir)
	forward(c1, c2, op.dir == SendRecv || op.dir == SendOnly)
	forward(c2, c1, op.dir == SendRecv || op.dir == RecvOnly)
	return nil
}

func forward(from, to *connection, on bool) {
	if on {
		from.mc.ForwardTo(to.mc)
	} else {
		from.mc.ForwardTo(nil)
	}
}

func reverse(d Direction) Direction {
	switch d {
	case SendOnly:
		return RecvOnly
	case RecvOnly:
		return SendOnly
	}
	return d
}

// audit answers <audit>: the package's capabilities (none beyond the
// defaults) and the joins, each once (id1 < id2 by connection id).
func (ms *mediaServer) audit(a mixAudit) []byte {
	if a.MixerID != "" {
		return mixAuditError(mixNoConference, "mixer "+shorten(a.MixerID)+" does not exist")
	}
	var b bytes.Buffer
	b.WriteString(`<mscmixer version="1.0" xmlns="` + mixerNamespace + `"><auditresponse status="200">`)
	if a.Capabilities != "false" {
		b.WriteString(`<capabilities/>`)
	}
	if a.Mixers != "false" {
		ms.mu.Lock()
		var joins [][3]string
		for _, c := range ms.conns {
			if c.peer != nil && c.id < c.peer.id {
				joins = append(joins, [3]string{c.id, c.peer.id, string(c.dir)})
			}
		}
		ms.mu.Unlock()
		slices.SortFunc(joins, func(x, y [3]string) int { return strings.Compare(x[0], y[0]) })
		b.WriteString(`<mixers>`)
		for _, j := range joins {
			b.WriteString(`<joinaudit id1="`)
			_ = xml.EscapeText(&b, []byte(j[0]))
			b.WriteString(`" id2="`)
			_ = xml.EscapeText(&b, []byte(j[1]))
			b.WriteString(`"><stream media="audio" direction="` + j[2] + `"/></joinaudit>`)
		}
		b.WriteString(`</mixers>`)
	}
	b.WriteString(`</auditresponse></mscmixer>`)
	return b.Bytes()
}

func mixAuditError(status int, reason string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<mscmixer version="1.0" xmlns="%s"><auditresponse status="%d" reason="`, mixerNamespace, status)
	_ = xml.EscapeText(&b, []byte(reason))
	b.WriteString(`"/></mscmixer>`)
	return b.Bytes()
}
