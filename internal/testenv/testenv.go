// Package testenv is how a test says what it needs from the machine it
// runs on: a tool in PATH, an installed file, root. When that is missing
// the test is skipped, and says why and what installs it; but in CI
// (CI=true, which .ci/run exports) a missing tool that make test-deps
// installs, or running as another user than root, fails the test: there
// the install step has run, so what is missing means that step is broken,
// and a skip would hide it. Only tests import this package.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// testDeps is what make test-deps (scripts/test-deps.sh) installs before
// make test runs the tests, by the name a test needs it by (a command, or
// for a file a name of its own), with its Debian package. It must match
// scripts/test-deps.sh: TestListsMatchTheScripts checks the packages.
var testDeps = map[string]string{
	"sipp":             "sip-tester",
	"ip":               "iproute2",
	"chromium":         "chromium",
	"promtool":         "prometheus",
	"ansible-playbook": "ansible-core",
	"kamailio":         "kamailio",
	"kamailio tls.so":  "kamailio-tls-modules",
	"linphonecsh":      "linphone-cli",
	"baresip":          "baresip-core",
}

// imageDeps is what make image-deps (scripts/image-deps.sh) installs for
// the image builds and boot tests, with the package of that script that
// brings it. make test runs image-deps only after the Go tests (in
// test-images), so these skip also in CI. It must match
// scripts/image-deps.sh: TestListsMatchTheScripts checks the packages.
var imageDeps = map[string]string{
	"mkfs.vfat":           "dosfstools",
	"mcopy":               "mtools",
	"mdir":                "mtools",
	"grub-editenv":        "grub-efi-amd64-bin", // through its dependency grub-common
	"mksquashfs":          "squashfs-tools",
	"genimage":            "genimage",
	"qemu-system-x86_64":  "qemu-system-x86",
	"qemu-system-aarch64": "qemu-system-arm",
}

// A verdict is what becomes of a test whose need is met or not.
type verdict int

const (
	run  verdict = iota // the need is met
	skip                // not met, and nothing says it should be
	fail                // not met, though in CI it must be
)

func (v verdict) String() string { return [...]string{"run", "skip", "fail"}[v] }

// decide is the verdict on a test needing name (a key of testDeps or
// imageDeps, or any other command), found or not, in CI or not, and the
// message to skip or fail it with.
func decide(name string, found, ci bool) (verdict, string) {
	if found {
		return run, ""
	}
	if pkg, ok := testDeps[name]; ok {
		if ci {
			return fail, fmt.Sprintf("%s: not installed, but make test-deps installs it (Debian %s): the install step is broken", name, pkg)
		}
		return skip, fmt.Sprintf("%s not installed (make test-deps installs it as root: Debian %s)", name, pkg)
	}
	if pkg, ok := imageDeps[name]; ok {
		return skip, fmt.Sprintf("%s not installed (make image-deps installs it as root: Debian %s)", name, pkg)
	}
	return skip, fmt.Sprintf("%s not installed", name)
}

// decideRoot is the verdict on a test needing root (to do why), run by
// user id uid, in CI or not, where .ci/run runs the tests as root.
func decideRoot(why string, uid int, ci bool) (verdict, string) {
	switch {
	case uid == 0:
		return run, ""
	case ci:
		return fail, fmt.Sprintf("not root (uid %d), but CI runs the tests as root: needed %s", uid, why)
	}
	return skip, fmt.Sprintf("needs root %s (make test as root runs it)", why)
}

// inCI says whether the tests run in CI: the environment variable CI is
// true (or 1), as .ci/run sets it and most CI services do.
func inCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

func apply(t testing.TB, v verdict, msg string) {
	t.Helper()
	switch v {
	case fail:
		t.Fatal(msg)
	case skip:
		t.Skip(msg)
	}
}

// NeedTool returns the path of the command name, or of the first of the
// alternatives found when name is not (another name of the same tool),
// and otherwise skips t, or fails it in CI when make test-deps installs
// name.
func NeedTool(t testing.TB, name string, alternatives ...string) string {
	t.Helper()
	for _, n := range append([]string{name}, alternatives...) {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	v, msg := decide(name, false, inCI())
	if len(alternatives) > 0 {
		msg += " (nor " + strings.Join(alternatives, ", ") + ")"
	}
	apply(t, v, msg)
	return ""
}

// NeedFile returns the first file matching one of the glob patterns,
// something installed that is not a command (a module), or skips t, or
// fails it in CI when make test-deps installs name (how testDeps calls
// that file).
func NeedFile(t testing.TB, name string, patterns ...string) string {
	t.Helper()
	for _, p := range patterns {
		if m, _ := filepath.Glob(p); len(m) > 0 {
			return m[0]
		}
	}
	v, msg := decide(name, false, inCI())
	apply(t, v, msg+" (no "+strings.Join(patterns, ", no ")+")")
	return ""
}

// NeedRoot skips t unless it runs as root, saying why it needs root (the
// rest of "needs root ...": "to create network namespaces"), or fails it
// in CI, where the tests run as root.
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	v, msg := decideRoot(why, os.Geteuid(), inCI())
	apply(t, v, msg)
}
