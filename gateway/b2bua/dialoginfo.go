package b2bua

import (
	"encoding/xml"
	"strings"
)

// userDialog is one local user's part in a call, as RFC 4235 shows it.
type userDialog struct {
	id, callID string
	initiator  bool   // the user called; else the user is called
	state      string // trying, early, confirmed
	remote     string // the other party's number
}

// versionMark stands for the document's version in a body until the
// NOTIFY is built (bodies are compared without it).
const versionMark = "\x00version\x00"

// dialogInfoBody is an application/dialog-info+xml document (RFC 4235
// §4) with the full state of entity: its dialogs, none when idle.
func dialogInfoBody(entity string, ds []userDialog) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<dialog-info xmlns="urn:ietf:params:xml:ns:dialog-info" version="` + versionMark + `" state="full" entity="`)
	xmlText(&b, entity)
	b.WriteString("\">\n")
	for _, d := range ds {
		dir := "recipient"
		if d.initiator {
			dir = "initiator"
		}
		b.WriteString(`  <dialog id="`)
		xmlText(&b, d.id)
		b.WriteString(`" call-id="`)
		xmlText(&b, d.callID)
		b.WriteString(`" direction="` + dir + `"><state>` + d.state + "</state>")
		if d.remote != "" {
			b.WriteString("<remote><identity>")
			xmlText(&b, d.remote)
			b.WriteString("</identity></remote>")
		}
		b.WriteString("</dialog>\n")
	}
	b.WriteString("</dialog-info>\n")
	return b.String()
}

// pidf is an application/pidf+xml document (RFC 3863) with entity's
// basic status.
func pidf(entity string, open bool) string {
	basic := "closed"
	if open {
		basic = "open"
	}
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<presence xmlns="urn:ietf:params:xml:ns:pidf" entity="`)
	xmlText(&b, entity)
	b.WriteString("\">\n  <tuple id=\"sip\"><status><basic>" + basic + "</basic></status><contact>")
	xmlText(&b, entity)
	b.WriteString("</contact></tuple>\n</presence>\n")
	return b.String()
}

func xmlText(b *strings.Builder, s string) { _ = xml.EscapeText(b, []byte(s)) }
