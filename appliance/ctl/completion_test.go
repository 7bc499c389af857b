package ctl

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/outpost/outpost/internal/testenv"
)

// TestBashCompletion: the script is valid bash, and sourced with
// COMP_WORDS/COMP_CWORD set it offers verbs, sub-verbs, flags and files.
func TestBashCompletion(t *testing.T) {
	bash := testenv.NeedTool(t, "bash")
	var script bytes.Buffer
	if rc := Main([]string{"completion", "bash"}, &script, os.Stderr); rc != 0 {
		t.Fatalf("completion bash: rc %d", rc)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "outpostctl.bash")
	if err := os.WriteFile(file, script.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bash, "-n", file).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	// Files to complete, in the directory completion runs in.
	for _, f := range []string{"branch.json", "bundle.img", "hosts.txt"} {
		os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	os.Mkdir(filepath.Join(dir, "lab"), 0o755)

	complete := func(line string) string {
		t.Helper()
		words := strings.Fields(line)
		if strings.HasSuffix(line, " ") {
			words = append(words, "")
		}
		var quoted []string
		for _, w := range words {
			quoted = append(quoted, "'"+w+"'")
		}
		prog := "source " + file + "\nCOMP_WORDS=(" + strings.Join(quoted, " ") + ")\nCOMP_CWORD=" +
			strconv.Itoa(len(words)-1) + "\n_outpostctl\nprintf '%s\\n' \"${COMPREPLY[@]}\" | sort | tr '\\n' ' '"
		cmd := exec.Command(bash, "--norc", "--noprofile", "-c", prog)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", line, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, tc := range []struct{ line, want string }{
		{"outpostctl con", "config"},
		{"outpostctl --json st", "status"},
		{"outpostctl --socket /tmp/s.sock re", "registrations"},
		{"outpostctl config ", "apply get history rollback"},
		{"outpostctl firmware ", "push status"},
		{"outpostctl firmware push --", "--allow-downgrade --ca --cert --json --key --no-reboot --server --socket --timeout --upload-timeout"},
		{"outpostctl firmware push bu", "bundle.img"},
		{"outpostctl config apply --dry-run br", "branch.json"},
		{"outpostctl config apply --if-match ", ""}, // a version number: nothing to offer
		{"outpostctl fleet push branch.json --hosts @h", "@hosts.txt"},
		{"outpostctl fleet push --cert ", "branch.json bundle.img hosts.txt lab outpostctl.bash"},
		{"outpostctl pki init ", "lab"},
		{"outpostctl cdr --l", "--limit"},
		{"outpostctl media-resources ", "matrix set"},
		{"outpostctl completion ", "bash"},
		{"outpostctl status ", ""},
	} {
		if got := complete(tc.line); got != tc.want {
			t.Errorf("%q completes to %q, want %q", tc.line, got, tc.want)
		}
	}
}

// TestCompletionCoversUsage: every verb and flag the completion offers is
// in the usage text, and every verb of the usage is offered.
func TestCompletionCoversUsage(t *testing.T) {
	for _, v := range verbs {
		for _, s := range v.subs {
			if !strings.Contains(usage, s) {
				t.Errorf("completion offers %q, usage does not name it", strings.TrimSpace(v.path+" "+s))
			}
		}
		for f := range v.flags {
			if !strings.Contains(usage, f) {
				t.Errorf("completion offers %s %s, usage does not name it", v.path, f)
			}
		}
	}
	for _, l := range strings.Split(usage, "\n") {
		if !strings.HasPrefix(l, "  ") || strings.HasPrefix(l, "   ") {
			continue
		}
		verb := strings.Fields(l)[0]
		if !strings.Contains(" "+strings.Join(verbs[0].subs, " ")+" ", " "+verb+" ") {
			t.Errorf("usage names verb %q, completion does not offer it", verb)
		}
	}
}
