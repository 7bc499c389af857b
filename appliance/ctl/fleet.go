package ctl

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/outpost/outpost/appliance/api"
)

const fleetPushUsage = "fleet push FILE --hosts HOST:PORT,...|@FILE --cert F --key F --ca F [--parallel N] [--timeout D] [--dry-run]"

// fleetResult is one box's outcome of a fleet push; a slice of them is
// the --json output.
type fleetResult struct {
	Host      string           `json:"host"`
	OK        bool             `json:"ok"`
	Version   int64            `json:"version"`
	Unchanged bool             `json:"unchanged"`
	DryRun    bool             `json:"dry_run,omitempty"`
	Error     string           `json:"error,omitempty"`
	Errors    []api.FieldError `json:"errors,omitempty"`
}

// fleet runs "outpostctl fleet VERB": for now only push, which applies one
// document to many boxes over their mutual-TLS management API.
func (c *cmd) fleet(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageError("fleet needs a verb: push")
	}
	return c.fleetVerb(ctx, args, progressWriter(c.errOut))
}

// fleetVerb is fleet with the progress writer as a parameter, for tests.
func (c *cmd) fleetVerb(ctx context.Context, args []string, progress io.Writer) error {
	switch args[0] {
	case "push":
		return c.fleetPush(ctx, args[1:], progress)
	default:
		return usageError(fmt.Sprintf("unknown fleet verb %q", args[0]))
	}
}

// progressWriter is w (stderr) when it is a terminal, else nil (no
// progress): a \r-updated line is noise in a log file or a pipe.
func progressWriter(w io.Writer) io.Writer {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return f
}

// fleetPush pushes the document to every host, at most --parallel at a
// time, each with its own --timeout. progress, when non-nil, gets a
// \r-updated progress line. It prints one result per host in the order
// given and returns an error when any box failed.
func (c *cmd) fleetPush(ctx context.Context, args []string, progress io.Writer) error {
	fs := flag.NewFlagSet("fleet push", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	hostsArg := fs.String("hosts", "", "")
	parallel := fs.Int("parallel", 8, "")
	certFile := fs.String("cert", c.certFile, "")
	keyFile := fs.String("key", c.keyFile, "")
	caFile := fs.String("ca", c.caFile, "")
	dry := fs.Bool("dry-run", false, "")
	timeout := fs.Duration("timeout", 30*time.Second, "")
	file, err := parseOne(fs, args, "FILE")
	if err != nil {
		return usageError(fleetPushUsage + ": " + err.Error())
	}
	if *hostsArg == "" || *certFile == "" || *keyFile == "" || *caFile == "" {
		return usageError(fleetPushUsage + ": --hosts, --cert, --key and --ca are required")
	}
	if *parallel < 1 {
		return usageError("fleet push: --parallel must be at least 1")
	}
	if *timeout <= 0 {
		return usageError("fleet push: --timeout must be positive")
	}
	hosts, err := parseHosts(*hostsArg)
	if err != nil {
		return err
	}
	doc, _, err := readDoc(file)
	if err != nil {
		return err
	}
	source := "fleet:" + file
	if file == "-" {
		source = "fleet:stdin"
	}
	// Build every client before pushing anything: a bad certificate, key
	// or CA is fatal for all boxes, and must not surface half-way through.
	clients := make([]*api.Client, len(hosts))
	for i, h := range hosts {
		if clients[i], err = api.NewTLSClient("https://"+h, *certFile, *keyFile, *caFile); err != nil {
			return fmt.Errorf("fleet push: %w", err)
		}
	}

	results := make([]fleetResult, len(hosts))
	var (
		mu         sync.Mutex
		done, fail int
		wg         sync.WaitGroup
		sem        = make(chan struct{}, *parallel)
	)
	finish := func(i int) {
		mu.Lock()
		done++
		if !results[i].OK {
			fail++
		}
		drawProgress(progress, done, fail, len(hosts))
		mu.Unlock()
	}
	drawProgress(progress, 0, 0, len(hosts))
	// Take a slot before starting each push, so boxes start in the order
	// given and at most --parallel are in flight.
	for i := range hosts {
		if !acquire(ctx, sem) {
			results[i] = fleetResult{Host: hosts[i], Error: "not pushed: " + overallCause(ctx)}
			finish(i)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			bctx, cancel := context.WithTimeout(ctx, *timeout)
			res, err := clients[i].Apply(bctx, doc, source, 0, *dry)
			cancel()
			results[i] = boxResult(hosts[i], res, err, *timeout)
			if err != nil && ctx.Err() != nil {
				// Not this box's timeout: the whole run was cut short.
				results[i].Error = "aborted: " + overallCause(ctx)
			}
			finish(i)
		}()
	}
	wg.Wait()
	if progress != nil {
		fmt.Fprintln(progress)
	}

	if err := c.print(results, func(w *table) {
		// The result (field errors) wraps under its column.
		fmt.Fprintln(w, "HOST\tRESULT")
		for _, r := range results {
			fmt.Fprintf(w, "%s\t%s\n", r.Host, r.text())
		}
	}); err != nil {
		return err
	}
	if fail > 0 {
		return fmt.Errorf("fleet push: %d of %d boxes failed", fail, len(hosts))
	}
	return nil
}

// acquire takes a slot of sem, or reports false once ctx is done (even
// when a slot came free at the same moment).
func acquire(ctx context.Context, sem chan struct{}) bool {
	select {
	case sem <- struct{}{}:
		if ctx.Err() != nil {
			<-sem
			return false
		}
		return true
	case <-ctx.Done():
		return false
	}
}

// overallCause says why the caller's context ended.
func overallCause(ctx context.Context) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "overall deadline reached"
	}
	return "canceled"
}

func (r fleetResult) text() string {
	switch {
	case !r.OK:
		return r.Error
	case r.DryRun:
		return "valid (dry run)"
	case r.Unchanged:
		return fmt.Sprintf("unchanged (version %d)", r.Version)
	default:
		return fmt.Sprintf("version %d", r.Version)
	}
}

const progressWidth = 10

// drawProgress rewrites the progress line: [#####.....] 12/40 ok 11 failed 1
func drawProgress(w io.Writer, done, failed, total int) {
	if w == nil {
		return
	}
	n := progressWidth
	if total > 0 {
		n = done * progressWidth / total
	}
	bar := strings.Repeat("#", n) + strings.Repeat(".", progressWidth-n)
	fmt.Fprintf(w, "\r[%s] %d/%d ok %d failed %d", bar, done, total, done-failed, failed)
}

// parseHosts reads --hosts: "a:1,https://b:2" or "@file" with one host a
// line (blank lines and # comments ignored). It returns HOST:PORT
// entries, duplicates removed, in the order given.
func parseHosts(arg string) ([]string, error) {
	var raw []string
	if name, ok := strings.CutPrefix(arg, "@"); ok {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("fleet push: hosts: %w", err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line, _, _ := strings.Cut(sc.Text(), "#")
			raw = append(raw, line)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("fleet push: hosts %s: %w", name, err)
		}
	} else {
		raw = strings.Split(arg, ",")
	}
	var hosts []string
	seen := make(map[string]bool)
	for _, h := range raw {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		n, err := normalizeHost(h)
		if err != nil {
			return nil, usageError(fmt.Sprintf("fleet push: host %q: %v", h, err))
		}
		if !seen[n] {
			seen[n] = true
			hosts = append(hosts, n)
		}
	}
	if len(hosts) == 0 {
		return nil, usageError("fleet push: --hosts lists no host")
	}
	return hosts, nil
}

func normalizeHost(h string) (string, error) {
	if strings.Contains(h, "://") {
		u, err := url.Parse(h)
		if err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return "", errors.New("want HOST:PORT or https://HOST:PORT")
		}
		h = u.Host
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil || host == "" || port == "" {
		return "", errors.New("want HOST:PORT or https://HOST:PORT")
	}
	return net.JoinHostPort(host, port), nil
}

func boxResult(host string, res api.ApplyResult, err error, timeout time.Duration) fleetResult {
	r := fleetResult{Host: host}
	if err != nil {
		var ae *api.APIError
		if errors.As(err, &ae) {
			r.Errors = ae.Body.Errors
			if ae.Status == 422 && len(ae.Body.Errors) > 0 {
				parts := make([]string, len(ae.Body.Errors))
				for i, fe := range ae.Body.Errors {
					parts[i] = fe.Path + ": " + fe.Message
				}
				r.Error = strings.Join(parts, "; ")
			} else {
				r.Error = fmt.Sprintf("HTTP %d: %s", ae.Status, ae.Body.Error)
			}
			return r
		}
		r.Error = shortCause(err, timeout)
		return r
	}
	r.OK = true
	r.Version = res.Version.Version
	r.Unchanged = res.Unchanged
	r.DryRun = res.DryRun
	return r
}

// shortCause turns a transport error into a short reason for the table:
// the URL and the "not reachable" wrapping say nothing the HOST column
// does not.
func shortCause(err error, timeout time.Duration) string {
	var (
		cve      *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostErr  x509.HostnameError
		invalid  x509.CertificateInvalidError
		recErr   tls.RecordHeaderError
		dnsErr   *net.DNSError
		opErr    *net.OpError
		urlError *url.Error
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("timed out after %s", timeout)
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &unknown):
		return "TLS: box certificate not signed by our CA"
	case errors.As(err, &hostErr):
		return "TLS: " + hostErr.Error()
	case errors.As(err, &invalid):
		return "TLS: box certificate invalid: " + invalid.Error()
	case errors.As(err, &cve):
		return "TLS: " + cve.Error()
	case errors.As(err, &recErr):
		return "TLS handshake failed: box does not speak TLS"
	case errors.As(err, &opErr) && opErr.Op == "remote error":
		// The box sent a TLS alert: it refused our client certificate.
		return "TLS: box refused our client certificate (" + opErr.Err.Error() + ")"
	case errors.As(err, &dnsErr):
		return "unknown host: " + dnsErr.Err
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset (TLS handshake refused?)"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed by box (TLS handshake refused?)"
	case errors.As(err, &urlError):
		return urlError.Err.Error()
	}
	return err.Error()
}
