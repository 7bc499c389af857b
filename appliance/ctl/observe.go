package ctl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

const cdrUsage = "cdr [--since RFC3339|DURATION] [--limit N]"

// cdr prints call detail records. --since takes a time (2026-11-29T10:00:00Z)
// or a duration back from now (1h), the way a technician asks "what happened
// in the last hour".
func (c *cmd) cdr(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("cdr", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	sinceArg := fs.String("since", "", "")
	limit := fs.Int("limit", 0, "")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		return usageError(cdrUsage)
	}
	var since time.Time
	if s := *sinceArg; s != "" {
		if d, err := time.ParseDuration(s); err == nil {
			since = time.Now().Add(-d)
		} else if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			since = t
		} else {
			return usageError(cdrUsage + ": --since wants an RFC 3339 time or a duration such as 1h")
		}
	}
	recs, err := c.cl.CDRs(ctx, since, *limit)
	if err != nil {
		return err
	}
	return c.print(recs, func(w *table) {
		// The target, the mode and the code (the disposition says it)
		// go first on a narrow terminal.
		w.Columns(col{}, col{min: 16}, col{min: 16}, col{}, col{drop: 1, min: 12}, col{drop: 2}, col{drop: 3}, col{}, col{})
		fmt.Fprintln(w, "STARTED\tCALLER\tDIALLED\tROUTE\tTARGET\tMODE\tCODE\tDISPOSITION\tDURATION")
		for _, r := range recs {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%.0fs\n", r.Started.Local().Format(time.DateTime), r.Caller,
				r.Dialled, r.Route, r.Target, r.Mode, r.Code, r.Disposition, r.DurationS)
		}
	})
}

func (c *cmd) interfaces(ctx context.Context) error {
	ifs, err := c.cl.Interfaces(ctx)
	if err != nil {
		return err
	}
	return c.print(ifs, func(w *table) {
		w.Columns(col{min: 8}, col{drop: 1}, col{}, col{min: 16}, col{min: 8})
		fmt.Fprintln(w, "INTERFACE\tKIND\tSTATE\tADDRESSES\tROLES")
		for _, l := range ifs.Links {
			state := "down"
			switch {
			case l.Up && l.Carrier:
				state = "up"
			case l.Up:
				state = "no-carrier"
			}
			kind := l.Kind
			if l.VLANID != 0 {
				kind = fmt.Sprintf("vlan %d", l.VLANID)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", l.Name, kind, state, strings.Join(l.Addrs, " "), strings.Join(l.Roles, ","))
		}
		if len(ifs.MSR) > 0 {
			fmt.Fprintln(w)
			w.Columns(col{min: 16}, col{min: 12}, col{}, col{min: 10}, col{drop: 1})
			fmt.Fprintln(w, "MSR UA\tSERVER\tREGISTERED\tLAST\tNEXT")
			for _, u := range ifs.MSR {
				last := fmt.Sprint(u.LastCode)
				if u.LastError != "" {
					last = u.LastError
				}
				fmt.Fprintf(w, "%s\t%s\t%v\t%s\t%s\n", u.URI, u.Server, u.Registered, last, u.Next.Local().Format(time.TimeOnly))
			}
		}
		w.KeyValue()
		if cc := ifs.ControlChannel; cc != nil {
			switch {
			case cc.Error != "":
				fmt.Fprintf(w, "\ncontrol channel\tnot listening: %s\n", cc.Error)
			case len(cc.Peers) == 0:
				fmt.Fprintf(w, "\ncontrol channel\t%s\t(no softswitch connected)\n", cc.Listen)
			}
			for _, p := range cc.Peers {
				fmt.Fprintf(w, "\ncontrol channel\t%s\t%s synced=%v keep-alive %ds, last heard %s\n", cc.Listen, p.Remote, p.Synced,
					p.KeepAliveS, p.LastRecv.Local().Format(time.TimeOnly))
			}
			if cc.Refused+cc.Dropped > 0 {
				fmt.Fprintf(w, "control channel\trefused %d (not a softswitch address), dropped %d\n", cc.Refused, cc.Dropped)
			}
		}
	})
}

func (c *cmd) mediaResources(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "set" {
		return c.mediaResourcesSet(ctx, args[1:])
	}
	if len(args) > 1 || len(args) == 1 && args[0] != "matrix" {
		return usageError("media-resources [matrix | set MSR active|inactive]")
	}
	m, err := c.cl.MediaResources(ctx)
	if err != nil {
		return err
	}
	if len(args) == 1 {
		return c.print(m.Matrix, func(w *table) { printMatrix(w, m.Matrix) })
	}
	return c.print(m, func(w *table) {
		fmt.Fprintf(w, "this box: zone %q, site %q\n", m.Zone, m.Site)
		if len(m.AdminInactive) > 0 {
			fmt.Fprintf(w, "inactive on this box: %s\n", strings.Join(m.AdminInactive, ", "))
		}
		if len(m.DocumentInactive) > 0 {
			fmt.Fprintf(w, "inactive by the document: %s\n", strings.Join(m.DocumentInactive, ", "))
		}
		w.Columns(col{min: 10}, col{drop: 3, min: 6}, col{}, col{min: 6}, col{min: 6}, col{}, col{drop: 2}, col{}, col{drop: 1})
		fmt.Fprintln(w, "MSR\tINTERFACE\tADDRESS\tZONE\tSITE\tLOAD\tCOEFF\tSTATE\tEXPIRES")
		for _, r := range m.Resources {
			state := "registered"
			switch {
			case r.Local && !r.Active:
				state = "local,inactive"
			case r.Local:
				state = "local"
			case !r.Registered:
				state = "unregistered"
			case !r.Active:
				state = "inactive"
			}
			exp := "-"
			if !r.Expires.IsZero() {
				exp = r.Expires.Local().Format(time.TimeOnly)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d%%\t%.2f\t%s\t%s\n", r.MSR, r.Interface, r.Addr, r.Zone, r.Site, r.Load, r.Coefficient, state, exp)
		}
	})
}

// printMatrix prints the site-distance matrix as a square table; "-" is a
// missing entry (the pair is forbidden).
func printMatrix(w *table, m map[string]map[string]int) {
	sites := map[string]bool{}
	for a, row := range m {
		sites[a] = true
		for b := range row {
			sites[b] = true
		}
	}
	names := slices.Sorted(maps.Keys(sites))
	w.Columns() // a square matrix: nothing to leave out
	fmt.Fprint(w, "FROM \\ TO")
	for _, n := range names {
		fmt.Fprintf(w, "\t%s", n)
	}
	fmt.Fprintln(w)
	for _, a := range names {
		fmt.Fprint(w, a)
		for _, b := range names {
			if d, ok := m[a][b]; ok {
				fmt.Fprintf(w, "\t%d", d)
			} else {
				fmt.Fprint(w, "\t-")
			}
		}
		fmt.Fprintln(w)
	}
}

// mediaResourcesSet is media-resources set MSR active|inactive: the
// administrative flag of an MSR's resources (kept in the box's database).
func (c *cmd) mediaResourcesSet(ctx context.Context, args []string) error {
	if len(args) != 2 || args[1] != "active" && args[1] != "inactive" {
		return usageError("media-resources set MSR active|inactive")
	}
	st, err := c.cl.SetMediaResourceActive(ctx, args[0], args[1] == "active")
	if err != nil {
		return err
	}
	return c.print(st, func(w *table) {
		state := "active: may be chosen"
		switch {
		case st.InactiveByDocument:
			state = "inactive: the document's media_resources.inactive lists it"
		case !st.Active:
			state = "inactive: never chosen"
		}
		kept := "kept across restarts"
		if !st.Persistent {
			kept = "until the box restarts"
		}
		fmt.Fprintf(w, "%s (%d resources) %s; %s\n", st.MSR, st.Resources, state, kept)
	})
}
