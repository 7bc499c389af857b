package ctl

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/images/layout"
)

// firmwareUsage is what outpostctl firmware takes.
const firmwareUsage = `firmware push BUNDLE [--no-reboot] [--allow-downgrade] [--upload-timeout D]
                                 install a signed update bundle into the box's inactive slot
                                 (one built before the installed firmware only with --allow-downgrade)
  firmware status                booted, committed and pending slots (A/B update)`

// firmware pushes update bundles (images/layout) and shows the A/B state.
func (c *cmd) firmware(ctx context.Context, args []string) error {
	return c.firmwareVerb(ctx, args, progressWriter(c.errOut))
}

// firmwareVerb is firmware with the upload's progress writer (nil: none)
// as a parameter, for tests.
func (c *cmd) firmwareVerb(ctx context.Context, args []string, progress io.Writer) error {
	if len(args) == 0 {
		return usageError("firmware needs a verb: push, status\n  " + firmwareUsage)
	}
	switch args[0] {
	case "status":
		st, err := c.cl.FirmwareStatus(ctx)
		if err != nil {
			return err
		}
		return c.print(st, func(w *table) {
			trial := ""
			if st.Trial {
				trial = " (trial boot, not committed yet)"
			}
			built := ""
			if st.Built > 0 {
				built = ", built " + time.Unix(st.Built, 0).UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(w, "build\t%s (%s%s)\n", st.Version, st.Arch, built)
			fmt.Fprintf(w, "booted\tslot %s%s\n", st.Slot, trial)
			fmt.Fprintf(w, "committed\tslot %s\n", st.Committed)
			if st.Pending != "" {
				fmt.Fprintf(w, "pending\tslot %s is tried once at the next boot\n", st.Pending)
			}
			if st.Failed != "" {
				fmt.Fprintf(w, "last update\tslot %s never became healthy on its trial boot: rolled back\n", st.Failed)
			}
			fmt.Fprintf(w, "healthy\t%v\n", st.Healthy)
		})
	case "push":
		const use = "firmware push BUNDLE [--no-reboot] [--allow-downgrade] [--upload-timeout D]"
		fs := flag.NewFlagSet("firmware push", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		noReboot := fs.Bool("no-reboot", false, "")
		allowDowngrade := fs.Bool("allow-downgrade", false, "")
		uploadTimeout := fs.Duration("upload-timeout", 10*time.Minute, "")
		file, err := parseOne(fs, args[1:], "BUNDLE")
		if err != nil {
			return usageError(use + ": " + err.Error())
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		// What is being sent, for the person at the console; the box is
		// the one that verifies it.
		if m, err := layout.ReadManifest(bytes.NewReader(data), nil); err == nil && c.errOut != nil && !c.json {
			fmt.Fprintf(c.errOut, "pushing %s: version %s, %s, %.1f MiB\n", file, m.Version, m.Arch, float64(m.Payload.Size)/(1<<20))
		}
		// A slot image over a branch WAN takes longer than the global
		// --timeout suits for API calls: the upload has its own bound.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), *uploadTimeout)
		defer cancel()
		var sent func(int64)
		if progress != nil {
			sent = uploadProgress(progress, int64(len(data)))
		}
		res, err := c.cl.PushFirmwareProgress(uctx, data, api.InstallOptions{Reboot: !*noReboot, AllowDowngrade: *allowDowngrade}, sent)
		if progress != nil {
			fmt.Fprintln(progress)
		}
		if err != nil {
			return err
		}
		return c.print(res, func(w *table) {
			fmt.Fprintf(w, "installed\tversion %s (%s) in slot %s, sha256 %s\n", res.Version, res.Arch, res.Slot, res.SHA256)
			if res.Downgrade {
				fmt.Fprintf(w, "downgrade\tthis build is older than the one it replaces (--allow-downgrade)\n")
			}
			if res.Reboot {
				fmt.Fprintf(w, "next\tthe box reboots now for one trial boot of slot %s; it commits the slot once healthy, otherwise the next boot returns to the current slot\n", res.Slot)
			} else {
				fmt.Fprintf(w, "next\tslot %s is tried once at the next reboot\n", res.Slot)
			}
		})
	default:
		return usageError(fmt.Sprintf("unknown firmware verb %q\n  %s", args[0], firmwareUsage))
	}
}

// uploadProgress returns a function that redraws the upload's progress
// line on w (a terminal) at each whole percent:
// upload [#####.....] 12.5/25.0 MiB 50%. The HTTP transport calls it from
// its goroutine; the caller prints the final newline after the push.
func uploadProgress(w io.Writer, total int64) func(sent int64) {
	var (
		mu   sync.Mutex
		last = int64(-1)
	)
	draw := func(sent int64) {
		pct := int64(100)
		if total > 0 {
			pct = sent * 100 / total
		}
		mu.Lock()
		defer mu.Unlock()
		if pct == last {
			return
		}
		last = pct
		n := int(pct) * progressWidth / 100
		fmt.Fprintf(w, "\rupload [%s%s] %.1f/%.1f MiB %d%%", strings.Repeat("#", n), strings.Repeat(".", progressWidth-n),
			float64(sent)/(1<<20), float64(total)/(1<<20), pct)
	}
	draw(0)
	return draw
}
