package firmware

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/outpost/outpost/appliance/api"
)

// ReadyOptions say how to find out that outpostd is healthy and what to
// do then.
type ReadyOptions struct {
	Socket    string   // outpostd's admin socket
	Updater   *Updater // nil: no A/B layout, nothing to commit
	ReadyFile string   // written once healthy ("" = none); /sbin/init waits for it
	Interval  time.Duration
	Log       *slog.Logger
}

// Ready waits until outpostd is healthy (see the package doc), then
// commits the boot and writes the ready file. It returns when that is done
// or ctx ends; it never gives up on its own: the init's trial watchdog
// decides how long is too long.
func Ready(ctx context.Context, o ReadyOptions) error {
	if o.Interval == 0 {
		o.Interval = 250 * time.Millisecond
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	cl := api.NewUnixClient(o.Socket)
	start := time.Now()
	var last string
	for {
		err := healthy(ctx, cl)
		if err == nil {
			break
		}
		if msg := err.Error(); msg != last {
			o.Log.Debug("not healthy yet", "err", err)
			last = msg
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(o.Interval):
		}
	}
	o.Log.Info("healthy: config loaded and SIP answering", "after", time.Since(start).Round(time.Millisecond))
	if o.Updater != nil {
		if _, err := o.Updater.Commit(); err != nil {
			return err
		}
	}
	if o.ReadyFile != "" {
		if err := os.WriteFile(o.ReadyFile, []byte(strconv.FormatInt(time.Now().Unix(), 10)+"\n"), 0o644); err != nil {
			return fmt.Errorf("firmware: ready file: %w", err)
		}
	}
	return nil
}

// healthy: the admin API answers with a stored config version and SIP
// listeners, and every UDP listener answers an OPTIONS.
func healthy(ctx context.Context, cl *api.Client) error {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := cl.Status(sctx)
	if err != nil {
		return err
	}
	if st.ConfigVersion <= 0 {
		return errors.New("no config version loaded")
	}
	if len(st.Listeners) == 0 {
		return errors.New("no SIP listener")
	}
	udp := 0
	for _, l := range st.Listeners {
		addr, ok := strings.CutPrefix(l, "udp:")
		if !ok {
			continue
		}
		udp++
		if err := ProbeOptions(sctx, loopbackFor(addr)); err != nil {
			return fmt.Errorf("SIP %s: %w", l, err)
		}
	}
	if udp == 0 {
		return errors.New("no UDP SIP listener to probe")
	}
	return nil
}

// loopbackFor turns a wildcard listener address into one to probe:
// 127.0.0.1 for both families, since Go's wildcard UDP sockets are
// dual-stack and a box may run without IPv6.
func loopbackFor(hostport string) string {
	ap, err := netip.ParseAddrPort(hostport)
	if err != nil || !ap.Addr().IsUnspecified() {
		return hostport
	}
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), ap.Port()).String()
}

// ProbeOptions sends one SIP OPTIONS over UDP to addr and waits (up to a
// second, or ctx) for any SIP response to it.
func ProbeOptions(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	c.SetDeadline(deadline)
	id := strconv.FormatInt(time.Now().UnixNano(), 36)
	msg := "OPTIONS sip:" + addr + " SIP/2.0\r\n" +
		"Via: SIP/2.0/UDP " + c.LocalAddr().String() + ";branch=z9hG4bK-ready-" + id + ";rport\r\n" +
		"Max-Forwards: 70\r\n" +
		"From: <sip:health@localhost>;tag=" + id + "\r\n" +
		"To: <sip:" + addr + ">\r\n" +
		"Call-ID: ready-" + id + "@localhost\r\n" +
		"CSeq: 1 OPTIONS\r\n" +
		"Content-Length: 0\r\n\r\n"
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return fmt.Errorf("no answer to OPTIONS: %w", err)
		}
		if strings.HasPrefix(string(buf[:n]), "SIP/2.0 ") && strings.Contains(string(buf[:n]), id) {
			return nil
		}
	}
}
