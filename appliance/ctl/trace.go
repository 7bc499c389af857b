package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/gateway/trace"
)

const traceUsage = "trace [--filter user=U|call-id=C|method=M] [--pcap FILE] [--count N] [--duration D]"

// errEnough ends a trace that has shown --count messages.
var errEnough = errors.New("enough messages")

// trace is `outpostctl trace`: the box's SIP messages as it sends and
// receives them, live, until Ctrl-C (or --count, --duration): as text,
// JSON lines with --json, or a pcap file with --pcap.
func (c *cmd) trace(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("trace", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	filter := fs.String("filter", "", "")
	pcapFile := fs.String("pcap", "", "")
	count := fs.Int("count", 0, "")
	dur := fs.Duration("duration", 0, "")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 || *count < 0 || *dur < 0 {
		return usageError(traceUsage)
	}
	if _, err := trace.ParseFilter(*filter); err != nil {
		return usageError(traceUsage + ": " + err.Error())
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *dur > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *dur)
		defer cancel()
	}
	var pw *trace.PcapWriter
	if *pcapFile != "" {
		f, err := os.Create(*pcapFile)
		if err != nil {
			return err
		}
		defer f.Close()
		if pw, err = trace.NewPcapWriter(f); err != nil {
			return err
		}
	}
	n := 0
	var dropped uint64
	err := c.cl.Trace(ctx, *filter, func(m api.TraceMessage) error {
		if m.Dropped > dropped {
			fmt.Fprintf(c.errOut, "outpostctl: %d messages dropped (the trace could not keep up)\n", m.Dropped-dropped)
			dropped = m.Dropped
		}
		var err error
		switch {
		case pw != nil:
			err = writePcap(pw, m)
		case c.json:
			err = writeCompact(c.out, m)
		default:
			err = writeTraceText(c.out, m)
		}
		if err != nil {
			return err
		}
		if n++; *count > 0 && n >= *count {
			return errEnough
		}
		return nil
	})
	if errors.Is(err, errEnough) {
		err = nil
	}
	if pw != nil && err == nil {
		fmt.Fprintf(c.errOut, "%d messages written to %s\n", n, *pcapFile)
	}
	return err
}

func writePcap(pw *trace.PcapWriter, m api.TraceMessage) error {
	local, err := netip.ParseAddrPort(m.Local)
	if err != nil {
		return fmt.Errorf("trace: local address %q: %w", m.Local, err)
	}
	remote, err := netip.ParseAddrPort(m.Remote)
	if err != nil {
		return fmt.Errorf("trace: remote address %q: %w", m.Remote, err)
	}
	dir := trace.In
	if m.Dir == "out" {
		dir = trace.Out
	}
	return pw.Write(&trace.Message{Time: m.Time, Dir: dir, Transport: m.Transport, Local: local, Remote: remote, Data: []byte(m.Message)})
}

// writeTraceText prints one message for people: a line with the time, the
// direction and the addresses, then the message, its lines indented.
func writeTraceText(w io.Writer, m api.TraceMessage) error {
	arrow := "<-"
	if m.Dir == "out" {
		arrow = "->"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %-3s %s %s %s %s (%d bytes)\n", m.Time.Local().Format("15:04:05.000000"), m.Dir, m.Transport, m.Local, arrow, m.Remote, len(m.Message))
	for line := range strings.Lines(strings.TrimRight(m.Message, "\r\n")) {
		b.WriteString("    " + strings.TrimRight(line, "\r\n") + "\n")
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeCompact writes m as one JSON line, as the API sends it.
func writeCompact(w io.Writer, m api.TraceMessage) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(m)
}
