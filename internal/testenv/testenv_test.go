package testenv

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// noSuchTool is a command no PATH holds.
const noSuchTool = "outpost-testenv-no-such-tool"

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name      string
		found, ci bool
		want      verdict
		msg       string // a part of the message
	}{
		{"sipp", true, true, run, ""},
		{"sipp", true, false, run, ""},
		{"sipp", false, true, fail, "sipp: not installed, but make test-deps installs it (Debian sip-tester): the install step is broken"},
		{"sipp", false, false, skip, "sipp not installed (make test-deps installs it"},
		{"kamailio tls.so", false, true, fail, "Debian kamailio-tls-modules"},
		{"ip", false, true, fail, "Debian iproute2"},
		// make test installs the image tools only after the Go tests.
		{"mkfs.vfat", false, true, skip, "make image-deps installs it as root: Debian dosfstools"},
		{"mkfs.vfat", false, false, skip, "make image-deps"},
		// Nothing installs other tools: they only ever skip.
		{noSuchTool, false, true, skip, noSuchTool + " not installed"},
		{noSuchTool, false, false, skip, noSuchTool + " not installed"},
		{noSuchTool, true, true, run, ""},
	} {
		v, msg := decide(tc.name, tc.found, tc.ci)
		if v != tc.want || !strings.Contains(msg, tc.msg) || (v == run) != (msg == "") {
			t.Errorf("decide(%q, found %v, CI %v) = %v %q, want %v with %q", tc.name, tc.found, tc.ci, v, msg, tc.want, tc.msg)
		}
	}
}

func TestDecideRoot(t *testing.T) {
	for _, tc := range []struct {
		uid  int
		ci   bool
		want verdict
		msg  string
	}{
		{0, true, run, ""},
		{0, false, run, ""},
		{1000, true, fail, "not root (uid 1000), but CI runs the tests as root: needed to create network namespaces"},
		{1000, false, skip, "needs root to create network namespaces"},
	} {
		v, msg := decideRoot("to create network namespaces", tc.uid, tc.ci)
		if v != tc.want || !strings.Contains(msg, tc.msg) || (v == run) != (msg == "") {
			t.Errorf("decideRoot(uid %d, CI %v) = %v %q, want %v with %q", tc.uid, tc.ci, v, msg, tc.want, tc.msg)
		}
	}
}

// recorder is a testing.TB whose Fatal and Skip record the verdict and
// end the goroutine, as the real ones do.
type recorder struct {
	testing.TB
	v   verdict
	msg string
}

func (r *recorder) Helper()           {}
func (r *recorder) Fatal(args ...any) { r.end(fail, args) }
func (r *recorder) Skip(args ...any)  { r.end(skip, args) }
func (r *recorder) end(v verdict, args []any) {
	r.v, r.msg = v, args[0].(string)
	runtime.Goexit()
}

// outcome runs f on a recorder in a goroutine of its own, as a test.
func outcome(t *testing.T, f func(testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

// TestNeedTool: with a PATH of one directory, a tool missing from it
// fails in CI when make test-deps installs it and skips otherwise; one
// present, under its name or an alternative, is returned.
func TestNeedTool(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	for _, tc := range []struct {
		ci   string
		tool string
		want verdict
	}{
		{"true", "sipp", fail},
		{"1", "sipp", fail},
		{"false", "sipp", skip},
		{"", "sipp", skip},
		{"true", noSuchTool, skip},
		{"true", "grub-editenv", skip},
	} {
		t.Setenv("CI", tc.ci)
		r := outcome(t, func(tb testing.TB) { NeedTool(tb, tc.tool) })
		if r.v != tc.want || !strings.HasPrefix(r.msg, tc.tool) {
			t.Errorf("CI=%q NeedTool(%s) with an empty PATH: %v %q, want %v", tc.ci, tc.tool, r.v, r.msg, tc.want)
		}
	}

	t.Setenv("CI", "true")
	r := outcome(t, func(tb testing.TB) { NeedTool(tb, "chromium", "chromium-browser") })
	if r.v != fail || !strings.Contains(r.msg, "(nor chromium-browser)") {
		t.Errorf("NeedTool(chromium, chromium-browser): %v %q", r.v, r.msg)
	}
	browser := filepath.Join(dir, "chromium-browser")
	if err := os.WriteFile(browser, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var got string
	r = outcome(t, func(tb testing.TB) { got = NeedTool(tb, "chromium", "chromium-browser") })
	if r.v != run || got != browser {
		t.Errorf("NeedTool(chromium, chromium-browser) with %s: %v %q, returned %q", browser, r.v, r.msg, got)
	}
}

func TestNeedFile(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("CI", "true")
	missing := filepath.Join(dir, "*", "tls.so")
	r := outcome(t, func(tb testing.TB) { NeedFile(tb, "kamailio tls.so", missing) })
	if r.v != fail || !strings.Contains(r.msg, "(no "+missing+")") {
		t.Errorf("NeedFile(kamailio tls.so, %s): %v %q", missing, r.v, r.msg)
	}
	t.Setenv("CI", "")
	if r = outcome(t, func(tb testing.TB) { NeedFile(tb, "kamailio tls.so", missing) }); r.v != skip {
		t.Errorf("NeedFile(kamailio tls.so, %s) outside CI: %v %q", missing, r.v, r.msg)
	}
	so := filepath.Join(dir, "x86_64", "tls.so")
	os.Mkdir(filepath.Dir(so), 0o755)
	if err := os.WriteFile(so, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var got string
	if r = outcome(t, func(tb testing.TB) { got = NeedFile(tb, "kamailio tls.so", missing) }); r.v != run || got != so {
		t.Errorf("NeedFile with %s: %v %q, returned %q", so, r.v, r.msg, got)
	}
}

// TestListsMatchTheScripts: the packages of testDeps are the ones
// scripts/test-deps.sh installs, and those of imageDeps are among the
// ones scripts/image-deps.sh does.
func TestListsMatchTheScripts(t *testing.T) {
	script := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "scripts", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var installs []string
	for _, m := range regexp.MustCompile(`need\+=\(([^)$]+)\)`).FindAllStringSubmatch(script("test-deps.sh"), -1) {
		installs = append(installs, m[1])
	}
	var listed []string
	for _, pkg := range testDeps {
		listed = append(listed, pkg)
	}
	slices.Sort(installs)
	slices.Sort(listed)
	if len(installs) == 0 || !slices.Equal(installs, listed) {
		t.Errorf("scripts/test-deps.sh installs %v, testDeps lists %v", installs, listed)
	}

	m := regexp.MustCompile(`(?s)pkgs=\(([^)]*)\)`).FindStringSubmatch(script("image-deps.sh"))
	if m == nil {
		t.Fatal("scripts/image-deps.sh: no pkgs=(...)")
	}
	pkgs := strings.Fields(m[1])
	for tool, pkg := range imageDeps {
		if !slices.Contains(pkgs, pkg) {
			t.Errorf("imageDeps: %s from %s, which scripts/image-deps.sh does not install (%v)", tool, pkg, pkgs)
		}
	}
}
