package appliance

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/outpost/outpost/appliance/config"
	"github.com/outpost/outpost/mode"
	"github.com/outpost/outpost/netcfg"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/translate")

// goldenNet is the network the golden translations are made in: a WAN, a
// LAN with a VLAN on it, and loopback.
var goldenNet = netcfg.State{
	Links: map[int]netcfg.Link{
		1: {Index: 1, Name: "lo", Up: true, Carrier: true, Loopback: true},
		2: {Index: 2, Name: "wan0", Up: true, Carrier: true},
		3: {Index: 3, Name: "eth0", Up: true, Carrier: true},
		4: {Index: 4, Name: "eth0.100", Up: true, Carrier: true, VLANID: 100, Parent: "eth0"},
	},
	Addrs: []netcfg.Addr{
		{LinkName: "lo", Prefix: netip.MustParsePrefix("127.0.0.1/8")},
		{LinkName: "wan0", Prefix: netip.MustParsePrefix("198.18.1.1/24")},
		{LinkName: "eth0", Prefix: netip.MustParsePrefix("198.18.0.1/24")},
		{LinkName: "eth0.100", Prefix: netip.MustParsePrefix("198.18.10.1/24")},
		{LinkName: "eth0.100", Prefix: netip.MustParsePrefix("fe80::1/64")},
	},
}

// TestTranslateGolden pins the contract between the HQ document and the
// parts: each document below, translated, must give exactly the Configs in
// testdata/translate/NAME.json (go test -run TestTranslateGolden -update
// rewrites them; review the diff).
func TestTranslateGolden(t *testing.T) {
	docs := map[string][]byte{"default": config.DefaultJSON()}
	for name, path := range map[string]string{
		"branch": "../examples/branch.json",
		"full":   "config/testdata/valid/full.json",
		"pool":   "config/testdata/valid/pool.json",
	} {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		docs[name] = raw
	}
	for name, raw := range docs {
		t.Run(name, func(t *testing.T) {
			doc, _, err := prepare(raw, nil)
			if err != nil {
				t.Fatalf("document does not validate: %v", err)
			}
			got, err := translate(doc, environment{Build: "golden", Mode: mode.Normal, Net: goldenNet})
			if err != nil {
				t.Fatal(err)
			}
			out, err := json.MarshalIndent(got, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, '\n')
			file := filepath.Join("testdata", "translate", name+".json")
			if *update {
				if err := os.WriteFile(file, out, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(out, want) {
				t.Errorf("translation of %s differs from %s (run with -update and review the diff):\n%s", name, file, lineDiff(want, out))
			}
		})
	}
}

// lineDiff shows the first lines that differ.
func lineDiff(want, got []byte) string {
	w, g := bytes.Split(want, []byte("\n")), bytes.Split(got, []byte("\n"))
	var b bytes.Buffer
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 10; i++ {
		var wl, gl []byte
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if !bytes.Equal(wl, gl) {
			b.WriteString("line " + strconv.Itoa(i+1) + ":\n  want " + string(wl) + "\n  got  " + string(gl) + "\n")
			shown++
		}
	}
	return b.String()
}

// TestTranslateAllowRFC2069: sip.registrar.allow_rfc2069 reaches the
// registrar; absent, qop=auth is required.
func TestTranslateAllowRFC2069(t *testing.T) {
	for _, allow := range []bool{false, true} {
		var d map[string]any
		if err := json.Unmarshal(config.DefaultJSON(), &d); err != nil {
			t.Fatal(err)
		}
		sip := d["sip"].(map[string]any)
		reg, _ := sip["registrar"].(map[string]any)
		if reg == nil {
			reg = map[string]any{}
			sip["registrar"] = reg
		}
		if allow {
			reg["allow_rfc2069"] = true
		}
		raw, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		doc, _, err := prepare(raw, nil)
		if err != nil {
			t.Fatalf("document does not validate: %v", err)
		}
		got, err := translate(doc, environment{Build: "test", Mode: mode.Normal, Net: goldenNet})
		if err != nil {
			t.Fatal(err)
		}
		if got.Gateway.Registrar.AllowNoQop != allow {
			t.Errorf("allow_rfc2069 %v: registrar AllowNoQop %v", allow, got.Gateway.Registrar.AllowNoQop)
		}
	}
}

// TestMSRName: msr.name, else the host name (one per box), else site.name.
func TestMSRName(t *testing.T) {
	for _, c := range []struct{ name, host, site, want string }{
		{"msr-kazan", "box1", "kazan", "msr-kazan"},
		{"", "box1", "kazan", "box1"},
		{"", "", "kazan", "kazan"},
		{"", "bad:host", "kazan", "kazan"},
		{"", "", "", "outpost"},
	} {
		d := &config.Document{}
		d.MSR.Name, d.Site.Name = c.name, c.site
		if got := msrName(d, c.host); got != c.want {
			t.Errorf("msrName(%q, host %q, site %q) = %q, want %q", c.name, c.host, c.site, got, c.want)
		}
		if got := msrConfig(d, c.host).Name; got != c.want {
			t.Errorf("msrConfig name = %q, want %q", got, c.want)
		}
	}
}
