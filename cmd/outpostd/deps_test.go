package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The architecture is a test (docs/design.md §2): who may import whom, what the
// daemon and the CLI may link, and that every package says what it is for.

const module = "github.com/outpost/outpost/"

type pkg struct {
	ImportPath string
	Doc        string
	Imports    []string
	Deps       []string
	CgoFiles   []string
	Standard   bool
	Name       string
}

func goList(t *testing.T, env []string, args ...string) []pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), env...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(&out)
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func rel(path string) string { return strings.TrimPrefix(path, module) }

func under(path, prefix string) bool { return path == prefix || strings.HasPrefix(path, prefix+"/") }

// sharedLeaves are pure leaves at the module root that several parts share,
// each with the packages (besides the composition root, appliance and cmd)
// allowed to import it; nil = any package. mode is the box's operating
// mode, named by every layer; siptarget is the one SIP target grammar of
// the document (appliance/config), the gateway and MSR.
var sharedLeaves = map[string][]string{
	"mode":      nil,
	"siptarget": {"appliance/config", "gateway", "media/msr"},
	// sipauth is the one SIP digest client: upstream registration, MSR,
	// the image boot test.
	"sipauth": {"gateway", "media/msr", "images"},
	// internal/testenv says what a test needs of the machine; netnstest
	// is a test helper itself.
	"internal/testenv": {"netcfg/netnstest"},
}

// pureLeaves import nothing of ours but the shared leaves. appliance/logsink
// (the syslog handler) is one: it is the logger, main wires it in.
var pureLeaves = []string{"mode", "siptarget", "sipauth", "appliance/config", "appliance/logsink", "appliance/directory", "gateway/dialplan", "gateway/digest", "gateway/siplog", "gateway/overload", "gateway/sanity",
	"gateway/resolve", "gateway/facing", "gateway/rendezvous", "media/sdprewrite", "media/g711", "media/rtpstats", "media/selection", "images/layout"}

// allowed says whether package from may import package to (both relative).
func allowed(from, to string) bool {
	// gateway/siptest is the SIP test harness: only _test.go files may
	// import it (TestDependencyRules reads the non-test imports).
	if under(to, "gateway/siptest") && !under(from, "gateway/siptest") {
		return false
	}
	if under(to, from) {
		return true
	}
	// A package's internal tools (its doc generator) serve that package
	// alone, so they may import it and each other.
	if i := strings.Index(from, "/internal/"); i >= 0 && under(to, from[:i]) {
		return true
	}
	for leaf, users := range sharedLeaves {
		if under(to, leaf) {
			if users == nil {
				return true
			}
			for _, u := range users {
				if under(from, u) {
					return true
				}
			}
		}
	}
	for _, leaf := range pureLeaves {
		if under(from, leaf) {
			return false
		}
	}
	top := strings.Split(from, "/")[0]
	switch top {
	case "cmd":
		return true
	case "appliance":
		return true // composition root: gateway, media, netcfg and its own sub-packages
	case "gateway":
		// The B2BUA reads SDP with media/sdprewrite, a pure leaf, so the
		// code base has one SDP reader; every other way from gateway to
		// media goes through interfaces gateway defines (b2bua.Anchor).
		if under(from, "gateway/b2bua") && to == "media/sdprewrite" {
			return true
		}
		// The HQ trunk is pools, their resolution and health, and the
		// candidates it offers upstream registration: the B2BUA and the
		// upstream agent see it through their own interfaces, and only
		// the Server builds one.
		if under(from, "gateway/hqtrunk") {
			return to == "gateway/health" || to == "gateway/resolve" || to == "gateway/upstream"
		}
		if under(to, "gateway/hqtrunk") && from != "gateway" {
			return false
		}
		// A sub-package never imports the root: the Server uses its
		// sub-packages, they know nothing of it.
		if to == "gateway" && from != "gateway" {
			return false
		}
		return under(to, "gateway") // never netcfg, media or appliance: the appliance adapts
	case "media":
		return under(to, "media") || under(to, "netcfg")
	case "netcfg":
		return under(to, "netcfg")
	case "bench":
		return true // load tools drive the product's packages and share bench/ helpers
	case "images":
		return under(to, "images")
	case "siptarget", "sipauth":
		return false // pure leaves
	}
	return false
}

func TestDependencyRules(t *testing.T) {
	for _, p := range goList(t, nil, "./...") {
		from := rel(p.ImportPath)
		if p.Doc == "" {
			t.Errorf("%s: no package doc comment", from)
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			if to := rel(imp); !allowed(from, to) {
				t.Errorf("%s imports %s: not allowed by docs/design.md §2", from, to)
			}
		}
	}
}

func TestDaemonLinksNoTestingNorCgo(t *testing.T) {
	for _, cgo := range []string{"CGO_ENABLED=0", "CGO_ENABLED=1"} {
		for _, p := range goList(t, []string{cgo}, "-deps", "./cmd/outpostd", "./cmd/outpostctl") {
			if p.ImportPath == "testing" || strings.HasPrefix(p.ImportPath, "testing/") {
				t.Errorf("%s: a command links %s", cgo, p.ImportPath)
			}
			// The standard library uses cgo for the resolver when allowed; our
			// code and our dependencies must not need it (cross-compiled firmware).
			if !p.Standard && len(p.CgoFiles) > 0 {
				t.Errorf("%s: %s needs cgo (%v)", cgo, p.ImportPath, p.CgoFiles)
			}
		}
	}
}

func TestCtlLinksNoProtocolStacks(t *testing.T) {
	for _, p := range goList(t, nil, "-deps", "./cmd/outpostctl") {
		for _, banned := range []string{"github.com/emiago/sipgo", "github.com/vishvananda/netlink", "modernc.org/sqlite", "github.com/pion/"} {
			if strings.HasPrefix(p.ImportPath, banned) {
				t.Errorf("outpostctl links %s; it must stay a thin client", p.ImportPath)
			}
		}
	}
}

func TestAllowedSharedLeaves(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		want     bool
	}{
		{"appliance/config", "siptarget", true},
		{"gateway/resolve", "siptarget", true},
		{"gateway/b2bua", "siptarget", true},
		{"media/msr", "siptarget", true},
		{"appliance", "siptarget", true},
		{"mode", "siptarget", false},
		{"gateway/dialplan", "mode", true},
		{"media/relay", "mode", true},
		{"mode", "gateway/dialplan", false},
		{"media/relay", "siptarget", false},
		{"netcfg", "siptarget", false},
		{"siptarget", "gateway/resolve", false},
		{"gateway/resolve", "gateway/dialplan", false},
		{"gateway/facing", "gateway/listen", false},
		{"gateway/listen", "gateway", false},
		{"gateway/fastpath", "gateway/registrar", true},
		{"gateway/upstream", "sipauth", true},
		{"media/msr", "sipauth", true},
		{"images", "sipauth", true},
		{"media/relay", "sipauth", false},
		{"appliance/config/internal/docgen", "appliance/config", true},
		{"appliance/config/internal/docgen/cmd/docgen", "appliance/config/internal/docgen", true},
		{"appliance/config/internal/docgen", "gateway", false},
		{"sipauth", "siptarget", false},
		{"gateway/upstream", "gateway/siptest", false},
		{"gateway", "gateway/siptest", false},
		{"gateway/siptest", "sipauth", true},
		{"gateway", "gateway/hqtrunk", true},
		{"gateway/hqtrunk", "gateway/resolve", true},
		{"gateway/hqtrunk", "siptarget", true},
		{"gateway/hqtrunk", "gateway/dialplan", false},
		{"gateway/hqtrunk", "gateway/b2bua", false},
		{"gateway/b2bua", "gateway/hqtrunk", false},
		{"gateway/upstream", "gateway/hqtrunk", false},
	} {
		if got := allowed(tc.from, tc.to); got != tc.want {
			t.Errorf("allowed(%s, %s) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}
