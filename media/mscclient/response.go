package mscclient

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"strconv"
)

// ErrResponse marks a package response body that cannot be read.
var ErrResponse = errors.New("mscclient: malformed msc-mixer response")

// maxResponse bounds the body ParseResponse reads (the CFW framing allows
// 64 KiB; a mixer response is a line).
const maxResponse = 16 << 10

// Response is the <response> of an <mscmixer> answer (RFC 6505 §4.2.3).
type Response struct {
	Status int
	Reason string
}

// MixerError is a package response other than 200 (RFC 6505 §4.6: 412
// connection does not exist, 408 already joined, 411 join failed…).
type MixerError struct {
	Status int
	Reason string
}

func (e *MixerError) Error() string {
	if e.Reason == "" {
		return "msc-mixer " + strconv.Itoa(e.Status)
	}
	return "msc-mixer " + strconv.Itoa(e.Status) + " " + e.Reason
}

type mixerResponse struct {
	XMLName  xml.Name `xml:"mscmixer"`
	Version  string   `xml:"version,attr"`
	Response *struct {
		Status string `xml:"status,attr"`
		Reason string `xml:"reason,attr"`
	} `xml:"response"`
}

// ParseResponse reads an <mscmixer> body holding a <response> element:
// version 1.0, the package namespace (or none), a three-digit status.
// Anything else is an error wrapping ErrResponse.
func ParseResponse(body []byte) (Response, error) {
	if len(body) > maxResponse {
		return Response{}, fmt.Errorf("%w: %d bytes", ErrResponse, len(body))
	}
	var m mixerResponse
	dec := xml.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&m); err != nil {
		return Response{}, fmt.Errorf("%w: %w", ErrResponse, err)
	}
	if ns := m.XMLName.Space; ns != "" && ns != mixerNamespace {
		return Response{}, fmt.Errorf("%w: namespace %q", ErrResponse, ns)
	}
	if m.Version != "1.0" {
		return Response{}, fmt.Errorf("%w: version %q", ErrResponse, m.Version)
	}
	if m.Response == nil {
		return Response{}, fmt.Errorf("%w: no <response>", ErrResponse)
	}
	st, err := strconv.Atoi(m.Response.Status)
	if err != nil || len(m.Response.Status) != 3 || st < 100 {
		return Response{}, fmt.Errorf("%w: status %q", ErrResponse, m.Response.Status)
	}
	return Response{Status: st, Reason: m.Response.Reason}, nil
}

// MixerBody is the <mscmixer> request body for op (join, unjoin,
// modifyjoin) between id1 and id2.
func MixerBody(op, id1, id2 string) []byte {
	var b bytes.Buffer
	b.WriteString(`<mscmixer version="1.0" xmlns="` + mixerNamespace + `"><` + op + ` id1="`)
	_ = xml.EscapeText(&b, []byte(id1))
	b.WriteString(`" id2="`)
	_ = xml.EscapeText(&b, []byte(id2))
	b.WriteString(`"/></mscmixer>`)
	return b.Bytes()
}
