package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/invalid/*.errors.txt from the current results")

// TestGoldenValid loads every testdata/valid/*.json: each must validate, and
// survive Marshal → Load unchanged.
func TestGoldenValid(t *testing.T) {
	files, err := filepath.Glob("testdata/valid/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no valid documents: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			d, err := Load(data)
			if err != nil {
				t.Fatalf("Load:\n%s", errorLines(err))
			}
			roundTrip(t, d)
		})
	}
}

// TestGoldenInvalid loads every testdata/invalid/*.json and compares the
// errors, one "path: message" per line, with the sibling .errors.txt.
// Run with -update to rewrite the .errors.txt files.
func TestGoldenInvalid(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no invalid documents: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			d, err := Load(data)
			if err == nil {
				t.Fatalf("Load accepted an invalid document: %+v", d)
			}
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error is %T, not Errors: %v", err, err)
			}
			got := errorLines(err)
			golden := strings.TrimSuffix(f, ".json") + ".errors.txt"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("errors differ from %s\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
}

func errorLines(err error) string {
	var errs Errors
	if !errors.As(err, &errs) {
		return err.Error() + "\n"
	}
	var b strings.Builder
	for _, fe := range errs {
		b.WriteString(fe.Error())
		b.WriteByte('\n')
	}
	return b.String()
}

// roundTrip checks that a valid document marshals to JSON that loads back
// to the same document.
func roundTrip(t testing.TB, d *Document) {
	t.Helper()
	out, err := json.Marshal(d)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	d2, err := Load(out)
	if err != nil {
		t.Fatalf("Load(Marshal(doc)): %v\n%s", err, out)
	}
	out2, err := json.Marshal(d2)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	if !bytes.Equal(out, out2) {
		t.Fatalf("round trip changed the document\n%s\n%s", out, out2)
	}
}

// TestExample checks the normative example shipped in examples/.
func TestExample(t *testing.T) {
	data, err := os.ReadFile("../../examples/branch.json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := Load(data)
	if err != nil {
		t.Fatalf("examples/branch.json:\n%s", errorLines(err))
	}
	if d.Standalone() {
		t.Error("example is standalone")
	}
	if got := d.SIP.EffectiveRealm(d.Site); got != "kazan.example.com" {
		t.Errorf("realm = %q", got)
	}
	if len(d.Users) != 3 || d.Users[0].Extension != "1001" || d.Users[2].DID != "+78435550100" {
		t.Errorf("users = %+v", d.Users)
	}
	if s := d.Dialplan[1].Survivable; s == nil || s.Route != "pstn" || s.Prepend != "+7495555" {
		t.Errorf("dialplan[1].survivable = %+v", s)
	}
	if d.MediaResources.Matrix["kazan"]["moscow"] != 10 || d.MediaResources.EffectivePerformance("msr-kazan") != 1 {
		t.Errorf("media_resources = %+v", d.MediaResources)
	}
	if d.MSR.EffectiveControlPort() != 5700 || d.MSR.EffectiveHeaderPrefix() != "P-Eltex-MSR-" {
		t.Errorf("msr = %+v", d.MSR)
	}
	// The copy kept beside the golden files must not drift from the example.
	golden, err := os.ReadFile("testdata/valid/branch.json")
	if err != nil || !bytes.Equal(golden, data) {
		t.Errorf("testdata/valid/branch.json differs from examples/branch.json (%v)", err)
	}
}
