package images

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
)

// runner executes host tools, logging each command at debug level and
// returning its output; a failure carries the tail of that output.
type runner struct {
	log *slog.Logger
	env []string // added to the environment of every command
}

func (r runner) run(ctx context.Context, dir string, name string, args ...string) ([]byte, error) {
	return r.runEnv(ctx, dir, nil, name, args...)
}

func (r runner) runEnv(ctx context.Context, dir string, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), r.env...), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	r.log.Debug("run", "cmd", name+" "+strings.Join(args, " "), "dir", dir)
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail(out.String(), 2000))
	}
	return out.Bytes(), nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
