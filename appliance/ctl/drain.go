package ctl

import (
	"context"
	"fmt"
	"time"
)

// drain is `outpostctl drain [--wait | --cancel]`.
func (c *cmd) drain(ctx context.Context, args []string) error {
	on, wait := true, false
	switch {
	case len(args) == 0:
	case len(args) == 1 && args[0] == "--wait":
		wait = true
	case len(args) == 1 && args[0] == "--cancel":
		on = false
	default:
		return usageError("drain [--wait | --cancel]")
	}
	st, err := c.cl.Drain(ctx, on, wait)
	if err != nil {
		return err
	}
	return c.print(st, func(w *table) {
		switch {
		case !st.Draining:
			fmt.Fprintln(w, "not draining: new calls are taken")
		case st.Drained:
			fmt.Fprintf(w, "drained: new calls refused, %d in progress, %d users registered here\n", st.Calls, st.Registered)
		default:
			fmt.Fprintf(w, "draining: new calls refused, %d in progress, %d users registered here, drain time up at %s\n",
				st.Calls, st.Registered, st.Until.Local().Format(time.TimeOnly))
		}
	})
}
