// Package ctl implements the outpostctl verbs over the management API
// client. It prints tables for people and, with --json, one JSON document
// for scripts. It links no SIP, SQLite or netlink code.
package ctl

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/outpost/outpost/appliance/api"
)

// DefaultSocket is where outpostd puts its admin socket on the box.
const DefaultSocket = "/var/lib/outpost/outpostd.sock"

const usage = `usage: outpostctl [--socket PATH | --server https://HOST:PORT --cert F --key F --ca F] [--json] VERB
verbs:
  status                         mode, config version, listeners, registrar counters
  registrations                  registered contacts
  services                       users' do-not-disturb and call forwarding
  voicemail                      messages the box recorded, by mailbox
  calls                          calls in progress
  route NUMBER                   which dial-plan rule a call to NUMBER takes, and where it would go now
  interfaces                     network interfaces, their roles, MSR registrations
  ` + cdrUsage + `
                                 call detail records (--since 1h: the last hour)
  media-resources [matrix]       media resources (MSR table) or the site-distance matrix
  media-resources set MSR active|inactive
                                 take an MSR's resources out of selection (or back), in the
                                 box's memory until it restarts
  ` + traceUsage + `
                                 live SIP messages as the box sends and receives them, until
                                 Ctrl-C: text, JSON lines (--json) or a pcap file (--pcap)
  drain [--wait | --cancel]      refuse new calls (503) while calls in progress finish; --wait
                                 returns when they have ended or sip.drain_s is up
  config get [--version N]       the running (or a stored) document, secrets redacted
  config apply FILE [--dry-run] [--if-match N]
                                 validate and apply a document ("-" = stdin)
  config history                 stored versions, newest first
  config rollback N              re-apply version N as a new version
  ` + fleetPushUsage + `
                                 push one document to many boxes (mutual TLS), a result per box
  ` + pkiUsage + `
                                 a lab CA and certificates for the management API
  ` + firmwareUsage + `
  ` + completionUsage + `                After: source <(outpostctl completion bash)
The socket defaults to $OUTPOST_SOCKET or ` + DefaultSocket + `; --server, --cert, --key
and --ca default to $OUTPOST_SERVER, $OUTPOST_CERT, $OUTPOST_KEY and $OUTPOST_CA.
`

// Main runs outpostctl and returns its exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("outpostctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	sock := fs.String("socket", envOr("OUTPOST_SOCKET", DefaultSocket), "admin socket of outpostd")
	server := fs.String("server", os.Getenv("OUTPOST_SERVER"), "remote box: https://HOST:PORT (mutual TLS)")
	certFile := fs.String("cert", os.Getenv("OUTPOST_CERT"), "client certificate for --server")
	keyFile := fs.String("key", os.Getenv("OUTPOST_KEY"), "client key for --server")
	caFile := fs.String("ca", os.Getenv("OUTPOST_CA"), "CA of the box's certificate for --server")
	asJSON := fs.Bool("json", false, "print one JSON document")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	if err := fs.Parse(hoistGlobalFlags(args)); err != nil {
		return 2
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	if rest[0] == "fleet" || rest[0] == "trace" {
		// fleet: hundreds of boxes, each with its own --timeout; trace: until
		// Ctrl-C or its own --duration. No overall deadline.
		ctx, cancel = context.WithCancel(context.Background())
	}
	defer cancel()
	c := &cmd{cl: api.NewUnixClient(*sock), out: stdout, errOut: stderr, json: *asJSON, width: termWidth(stdout),
		certFile: *certFile, keyFile: *keyFile, caFile: *caFile}
	// pki works on local files, fleet dials each box itself and
	// completion prints a script: none needs (or may fail on) the
	// --server client.
	if *server != "" && rest[0] != "pki" && rest[0] != "fleet" && rest[0] != "completion" {
		cl, err := api.NewTLSClient(*server, *certFile, *keyFile, *caFile)
		if err != nil {
			fmt.Fprintf(stderr, "outpostctl: --server: %v\n", err)
			return 2
		}
		c.cl = cl
	}
	err := c.run(ctx, rest)
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "outpostctl: %s\n%s", ue, usage)
		return 2
	default:
		fmt.Fprintf(stderr, "outpostctl: %v\n", err)
		return 1
	}
}

type usageError string

func (u usageError) Error() string { return string(u) }

type cmd struct {
	cl     *api.Client
	out    io.Writer
	errOut io.Writer // progress and notes
	json   bool
	width  int // of the terminal tables are fitted to; 0 = no limit (not a terminal)
	// The global --cert/--key/--ca, defaults for fleet push.
	certFile, keyFile, caFile string
}

func (c *cmd) run(ctx context.Context, args []string) error {
	switch args[0] {
	case "status":
		s, err := c.cl.Status(ctx)
		if err != nil {
			return err
		}
		return c.print(s, func(w *table) {
			fmt.Fprintf(w, "site\t%s\nmode\t%s\nbuild\t%s\nuptime\t%s\n", s.Site, s.Mode, s.Version, time.Duration(s.UptimeS)*time.Second)
			fmt.Fprintf(w, "config\tversion %d (%s)\n", s.ConfigVersion, s.ConfigSource)
			for _, l := range s.Listeners {
				fmt.Fprintf(w, "sip\t%s\n", l)
			}
			if c := s.SIPTLS; c != nil {
				fmt.Fprintf(w, "sip tls\t%s certificate %s, expires %s\n", c.Source, c.Subject, c.NotAfter.Format(time.DateOnly))
				fmt.Fprintf(w, "sip tls sha256\t%s\n", c.SHA256)
			}
			fmt.Fprintf(w, "registrations\t%d users, %d contacts\n", s.AORs, s.Bindings)
			r := s.Registrar
			fmt.Fprintf(w, "registrar\tregistered %d, unregistered %d, expired %d, challenges %d\n", r.Registered, r.Unregistered, r.Expired, r.Challenges)
			fmt.Fprintf(w, "abuse\tauth failures %d, blocked %d, storm 503s %d, garbage datagrams dropped %d\n", r.AuthFailures, r.AuthBlocked, r.StormRefused, s.SIPDropped)
			fmt.Fprintf(w, "calls\t%d in progress\n", s.CallsActive)
			if s.Draining {
				fmt.Fprintf(w, "draining\tnew calls refused until %s\n", s.DrainUntil.Local().Format(time.TimeOnly))
			}
			if s.Upstream != nil {
				fmt.Fprintf(w, "upstream\tregistered %d, pending %d, failed %d (registrations at HQ)\n",
					s.Upstream["registered"], s.Upstream["pending"]+s.Upstream["registering"], s.Upstream["failed"])
			}
			for _, t := range s.HQ {
				fmt.Fprintf(w, "hq target\t%s %s (%s since %s; rtt %.1f ms)\n", t.Target, targetState(t), t.Reason,
					t.LastChange.Local().Format(time.TimeOnly), t.LastRTTMs)
				if t.LastError != "" && !t.Up {
					fmt.Fprintf(w, "\t  last probe: %s\n", t.LastError)
				}
			}
			for _, g := range s.PSTN {
				probes := "no probes"
				if g.Probed {
					probes = fmt.Sprintf("rtt %.1f ms", g.LastRTTMs)
				}
				fmt.Fprintf(w, "pstn gateway\t%s %s %s (%s since %s; %s)\n", g.Name, g.Target, targetState(g.TargetHealth), g.Reason,
					g.LastChange.Local().Format(time.TimeOnly), probes)
			}
			if p := s.Pool; p != nil {
				fmt.Fprintf(w, "pool	%s: %d users homed here, %d served as backup; %d redirected, %d handed over\n",
					p.Self, p.HomedHere, p.ServedAsBackup, r.Redirected, r.HandedOver)
				for _, m := range p.Members {
					state := "self"
					switch {
					case m.Self:
					case m.Serving:
						state = "up (" + m.Reason + " since " + m.Since.Local().Format(time.TimeOnly) + ")"
					case m.Up:
						state = "up, in its hold (since " + m.Since.Local().Format(time.TimeOnly) + ")"
					default:
						state = "DOWN (" + m.Reason + " since " + m.Since.Local().Format(time.TimeOnly) + ")"
					}
					fmt.Fprintf(w, "pool member	%s %s %s\n", m.Name, m.Target, state)
				}
			}
		})
	case "registrations":
		rs, err := c.cl.Registrations(ctx)
		if err != nil {
			return err
		}
		return c.print(rs, func(w *table) {
			// Narrow terminals lose the user agent, then the source
			// (the contact mostly says it); long URIs are cut.
			w.Columns(col{min: 16}, col{min: 20}, col{drop: 2}, col{}, col{drop: 1, min: 12})
			fmt.Fprintln(w, "AOR\tCONTACT\tSOURCE\tEXPIRES IN\tUSER AGENT")
			for _, r := range rs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%ds\t%s\n", r.AOR, r.Contact, r.Source, r.ExpiresInS, r.UserAgent)
			}
		})
	case "services":
		us, err := c.cl.Services(ctx)
		if err != nil {
			return err
		}
		return c.print(us, func(w *table) {
			fmt.Fprintln(w, "USER\tDND\tALWAYS\tBUSY\tNO ANSWER\tSET FROM PHONE")
			for _, u := range us {
				dnd, na := "-", cmp.Or(u.ForwardNoAnswer, "-")
				if u.DND {
					dnd = "on"
				}
				if u.ForwardNoAnswer != "" && u.NoAnswerS > 0 {
					na += fmt.Sprintf(" after %ds", u.NoAnswerS)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", u.Extension, dnd, cmp.Or(u.ForwardAlways, "-"), cmp.Or(u.ForwardBusy, "-"), na,
					cmp.Or(strings.Join(u.FromPhone, ","), "-"))
			}
		})
	case "voicemail":
		vm, err := c.cl.Voicemail(ctx)
		if err != nil {
			return err
		}
		return c.print(vm, func(w *table) {
			fmt.Fprintln(w, "MAILBOX	RECEIVED	FROM	LENGTH	STATE	DELIVERED")
			for _, m := range vm.Messages {
				from, delivered := cmp.Or(m.Caller, "-"), "-"
				if m.CallerName != "" {
					from = m.CallerName + " " + from
				}
				if !m.Delivered.IsZero() {
					delivered = m.Delivered.Local().Format(time.DateTime)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%.1fs\t%s\t%s\n", m.Mailbox, m.Received.Local().Format(time.DateTime), from,
					float64(m.DurationMS)/1000, m.State, delivered)
			}
		})
	case "calls":
		cs, err := c.cl.Calls(ctx)
		if err != nil {
			return err
		}
		return c.print(cs, func(w *table) {
			// Media statistics, then route, target and start time go
			// first on a narrow terminal; Call-IDs and URIs are cut.
			w.Columns(col{min: 12}, col{min: 16}, col{min: 16}, col{drop: 3}, col{drop: 4, min: 12}, col{}, col{drop: 5},
				col{drop: 2}, col{drop: 1})
			fmt.Fprintln(w, "CALL-ID\tFROM\tTO\tROUTE\tTARGET\tSTATE\tSTARTED\tMEDIA A pkt/lost/jit/prot\tMEDIA B")
			for _, x := range cs {
				ma, mb := "-", "-"
				if m := x.Media; m != nil {
					ma = fmt.Sprintf("%d/%d/%.1fms/%s", m[0].Packets, m[0].Lost, m[0].JitterMs, m[0].Protection)
					mb = fmt.Sprintf("%d/%d/%.1fms/%s", m[1].Packets, m[1].Lost, m[1].JitterMs, m[1].Protection)
				}
				for _, s := range x.Streams { // e.g. "+video 750"
					ma += fmt.Sprintf(" +%s %d", s.Kind, s.Legs[0].Packets)
					mb += fmt.Sprintf(" +%s %d", s.Kind, s.Legs[1].Packets)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", x.ID, x.From, x.To, x.Route, x.Target, x.State,
					x.Started.Local().Format(time.TimeOnly), ma, mb)
			}
		})
	case "route":
		if len(args) != 2 {
			return usageError("route NUMBER")
		}
		r, err := c.cl.Route(ctx, args[1])
		if err != nil {
			return err
		}
		return c.print(r, func(w *table) {
			fmt.Fprintf(w, "%s\n", r.Explain)
			if !r.Routed {
				return
			}
			fmt.Fprintf(w, "route\t%s -> %s (mode %s)\n", r.Route, r.Target, r.Mode)
			if len(r.Targets) == 0 {
				fmt.Fprintf(w, "targets\tnone available now\n")
			}
			for i, t := range r.Targets {
				fmt.Fprintf(w, "target %d\t%s\n", i+1, t)
			}
		})
	case "interfaces":
		if len(args) != 1 {
			return usageError("interfaces")
		}
		return c.interfaces(ctx)
	case "drain":
		return c.drain(ctx, args[1:])
	case "trace":
		return c.trace(ctx, args[1:])
	case "cdr":
		return c.cdr(ctx, args[1:])
	case "media-resources":
		return c.mediaResources(ctx, args[1:])
	case "pki":
		return c.pki(ctx, args[1:])
	case "firmware":
		return c.firmware(ctx, args[1:])
	case "fleet":
		return c.fleet(ctx, args[1:])
	case "completion":
		return c.completion(args[1:])
	case "config":
		if len(args) < 2 {
			return usageError("config needs a verb: get, apply, history, rollback")
		}
		return c.config(ctx, args[1], args[2:])
	default:
		return usageError(fmt.Sprintf("unknown verb %q", args[0]))
	}
}

func (c *cmd) config(ctx context.Context, verb string, args []string) error {
	switch verb {
	case "get":
		fs := flag.NewFlagSet("config get", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		v := fs.Int64("version", 0, "")
		if err := fs.Parse(args); err != nil {
			return usageError("config get [--version N]")
		}
		cr, err := c.cl.Config(ctx, *v)
		if err != nil {
			return err
		}
		if c.json {
			return c.print(cr, nil)
		}
		// For people the document itself, ready to edit and apply again.
		var doc any
		if err := json.Unmarshal(cr.Document, &doc); err != nil {
			return err
		}
		return writeIndented(c.out, doc)
	case "apply":
		fs := flag.NewFlagSet("config apply", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		dry := fs.Bool("dry-run", false, "")
		ifMatch := fs.Int64("if-match", 0, "")
		file, err := parseOne(fs, args, "FILE")
		if err != nil {
			return usageError("config apply FILE [--dry-run] [--if-match N]: " + err.Error())
		}
		data, src, err := readDoc(file)
		if err != nil {
			return err
		}
		res, err := c.cl.Apply(ctx, data, src, *ifMatch, *dry)
		if err != nil {
			return err
		}
		return c.print(res, func(w *table) {
			if res.DryRun {
				fmt.Fprintf(w, "valid: the document would replace version %d (nothing applied)\n", res.Version.Version)
				if len(res.Diff) == 0 {
					fmt.Fprintln(w, "no change")
				}
				for _, l := range res.Diff {
					fmt.Fprintln(w, l)
				}
				return
			}
			if res.Unchanged {
				fmt.Fprintf(w, "unchanged: the document is the running version %d\n", res.Version.Version)
				return
			}
			fmt.Fprintf(w, "applied: version %d\n", res.Version.Version)
		})
	case "history":
		vs, err := c.cl.History(ctx)
		if err != nil {
			return err
		}
		return c.print(vs, func(w *table) {
			w.Columns(col{}, col{}, col{min: 12, keepEnd: true}, col{})
			fmt.Fprintln(w, "VERSION\tAPPLIED\tSOURCE\tACTIVE")
			for _, v := range vs {
				act := ""
				if v.Active {
					act = "*"
				}
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", v.Version, v.AppliedAt.Local().Format(time.DateTime), v.Source, act)
			}
		})
	case "rollback":
		if len(args) != 1 {
			return usageError("config rollback N")
		}
		n, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || n < 1 {
			return usageError("config rollback N: N is a version number")
		}
		res, err := c.cl.Rollback(ctx, n)
		if err != nil {
			return err
		}
		return c.print(res, func(w *table) {
			fmt.Fprintf(w, "rolled back: version %d is now active with the document of version %d\n", res.Version.Version, n)
		})
	default:
		return usageError(fmt.Sprintf("unknown config verb %q", verb))
	}
}

// hoistGlobalFlags moves the global flags to the front wherever they were
// written, so that "outpostctl status --json" works like "outpostctl --json status".
func hoistGlobalFlags(args []string) []string {
	var global, rest []string
	verb := ""
	for i := 0; i < len(args); i++ {
		if verb == "" && !strings.HasPrefix(args[i], "-") {
			verb = args[i]
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") {
			rest = append(rest, args[i])
			continue
		}
		switch name {
		case "json":
			global = append(global, args[i])
		case "timeout":
			if verb == "fleet" { // fleet push --timeout is per box
				rest = append(rest, args[i])
				continue
			}
			fallthrough
		case "socket":
			global = append(global, args[i])
			if !hasValue && i+1 < len(args) {
				i++
				global = append(global, args[i])
			}
		default:
			rest = append(rest, args[i])
		}
	}
	return append(global, rest...)
}

// parseOne parses fs from args holding exactly one positional argument
// (a FILE or DIR) before, between or after the flags. The FlagSet knows
// which flags take a value, so a flag's value is never taken for it.
func parseOne(fs *flag.FlagSet, args []string, what string) (string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return "", err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch {
	case len(pos) == 0 || pos[0] == "":
		return "", fmt.Errorf("%s is missing", what)
	case len(pos) > 1:
		return "", fmt.Errorf("unexpected %q", strings.Join(pos[1:], " "))
	}
	return pos[0], nil
}

func readDoc(file string) ([]byte, string, error) {
	if file == "-" {
		b, err := io.ReadAll(os.Stdin)
		return b, "outpostctl:stdin", err
	}
	b, err := os.ReadFile(file)
	return b, "outpostctl:" + file, err
}

// print writes v as JSON with --json (or without fill), else the table
// fill writes, fitted to c.width.
func (c *cmd) print(v any, fill func(*table)) error {
	if c.json || fill == nil {
		return writeIndented(c.out, v)
	}
	t := &table{out: c.out, width: c.width}
	fill(t)
	return t.Flush()
}

func writeIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // "<redacted>", not "\u003credacted\u003e": this is no web page
	return enc.Encode(v)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// targetState is an HQ target's or PSTN gateway's state in one word (or
// the end of its block).
func targetState(t api.TargetHealth) string {
	switch {
	case !t.Up:
		return "DOWN"
	case !t.BlockedUntil.IsZero() && t.BlockedUntil.After(time.Now()):
		return "blocked until " + t.BlockedUntil.Local().Format(time.TimeOnly)
	}
	return "up"
}
