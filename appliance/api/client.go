package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Client talks to the API over the Unix admin socket.
type Client struct {
	hc   *http.Client
	base string
}

// NewUnixClient returns a client for the admin socket at path.
func NewUnixClient(path string) *Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	return &Client{hc: &http.Client{Transport: tr}, base: "http://outpostd"}
}

// NewTLSClient returns a client for a box's management API over HTTPS with
// mutual TLS: server is "https://HOST:PORT"; certFile/keyFile are the HQ
// client certificate, caFile the CA that signed the box's certificate.
func NewTLSClient(server, certFile, keyFile, caFile string) (*Client, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("client certificate: %w", err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("CA %s: no PEM certificate", caFile)
	}
	u, err := url.Parse(server)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("server %q: want https://HOST:PORT", server)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		MinVersion:   tls.VersionTLS12,
	}}
	return &Client{hc: &http.Client{Transport: tr}, base: strings.TrimSuffix(server, "/")}, nil
}

// APIError is a non-2xx answer.
type APIError struct {
	Status int
	Body   ErrorBody
}

func (e *APIError) Error() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d: %s", e.Status, e.Body.Error)
	for _, fe := range e.Body.Errors {
		fmt.Fprintf(&b, "\n  %s: %s", fe.Path, fe.Message)
	}
	return b.String()
}

// Do performs one call and decodes a JSON answer into out (if non-nil).
func (c *Client) Do(ctx context.Context, method, path string, hdr http.Header, body []byte, out any) error {
	return c.do(ctx, method, path, hdr, bytes.NewReader(body), int64(len(body)), out)
}

// do is Do with the body as a reader of size bytes.
func (c *Client) do(ctx context.Context, method, path string, hdr http.Header, body io.Reader, size int64, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	req.ContentLength = size
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("outpostd not reachable: %w", err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return fmt.Errorf("reading answer: %w", err)
	}
	if res.StatusCode/100 != 2 {
		e := &APIError{Status: res.StatusCode}
		if json.Unmarshal(data, &e.Body) != nil || e.Body.Error == "" {
			e.Body.Error = http.StatusText(res.StatusCode)
		}
		return e
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("decoding answer: %w", err)
		}
	}
	return nil
}

func (c *Client) Status(ctx context.Context) (s Status, err error) {
	return s, c.Do(ctx, http.MethodGet, "/api/v1/status", nil, nil, &s)
}

func (c *Client) Registrations(ctx context.Context) (rs []Registration, err error) {
	return rs, c.Do(ctx, http.MethodGet, "/api/v1/registrations", nil, nil, &rs)
}

func (c *Client) Config(ctx context.Context, version int64) (cr ConfigResponse, err error) {
	p := "/api/v1/config"
	if version > 0 {
		p += "?version=" + strconv.FormatInt(version, 10)
	}
	return cr, c.Do(ctx, http.MethodGet, p, nil, nil, &cr)
}

func (c *Client) History(ctx context.Context) (vs []Version, err error) {
	return vs, c.Do(ctx, http.MethodGet, "/api/v1/config/history", nil, nil, &vs)
}

func (c *Client) Apply(ctx context.Context, doc []byte, source string, ifMatch int64, dryRun bool) (r ApplyResult, err error) {
	p := "/api/v1/config"
	if dryRun {
		p += "?dry_run=1"
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if source != "" {
		h.Set("X-Outpost-Source", source)
	}
	if ifMatch > 0 {
		h.Set("If-Match", etag(ifMatch))
	}
	return r, c.Do(ctx, http.MethodPut, p, h, doc, &r)
}

func (c *Client) Rollback(ctx context.Context, version int64) (r ApplyResult, err error) {
	return r, c.Do(ctx, http.MethodPost, "/api/v1/config/rollback/"+strconv.FormatInt(version, 10), nil, nil, &r)
}

func (c *Client) Route(ctx context.Context, number string) (r RouteResult, err error) {
	return r, c.Do(ctx, http.MethodGet, "/api/v1/route/"+url.PathEscape(number), nil, nil, &r)
}

func (c *Client) Calls(ctx context.Context) (cs []Call, err error) {
	return cs, c.Do(ctx, http.MethodGet, "/api/v1/calls", nil, nil, &cs)
}

func (c *Client) Interfaces(ctx context.Context) (i Interfaces, err error) {
	return i, c.Do(ctx, http.MethodGet, "/api/v1/interfaces", nil, nil, &i)
}

// CDRs fetches records of calls started at or after since (zero: all);
// limit 0 = the server's maximum.
func (c *Client) CDRs(ctx context.Context, since time.Time, limit int) (rs []CDR, err error) {
	v := url.Values{}
	if !since.IsZero() {
		v.Set("since", since.UTC().Format(time.RFC3339Nano))
	}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	p := "/api/v1/cdr"
	if len(v) > 0 {
		p += "?" + v.Encode()
	}
	return rs, c.Do(ctx, http.MethodGet, p, nil, nil, &rs)
}

func (c *Client) MediaResources(ctx context.Context) (m MediaResources, err error) {
	return m, c.Do(ctx, http.MethodGet, "/api/v1/media-resources", nil, nil, &m)
}
