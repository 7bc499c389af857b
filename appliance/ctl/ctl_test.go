package ctl

import (
	"flag"
	"fmt"
	"testing"
)

func TestHoistGlobalFlags(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"status", "--json"}, []string{"--json", "status"}},
		{[]string{"config", "apply", "f.json", "--socket", "/s", "--dry-run"}, []string{"--socket", "/s", "config", "apply", "f.json", "--dry-run"}},
		{[]string{"--socket=/s", "config", "get", "--version", "3", "-json"}, []string{"--socket=/s", "-json", "config", "get", "--version", "3"}},
	} {
		if got := hoistGlobalFlags(c.in); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("hoist(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestParseOneIgnoresFlagValues(t *testing.T) {
	for _, args := range [][]string{
		{"--if-match", "3", "doc.json"},
		{"doc.json", "--if-match", "3"},
		{"--dry-run", "doc.json", "--if-match=3"},
	} {
		fs := flag.NewFlagSet("config apply", flag.ContinueOnError)
		fs.Int64("if-match", 0, "")
		fs.Bool("dry-run", false, "")
		if got, err := parseOne(fs, args, "FILE"); err != nil || got != "doc.json" {
			t.Errorf("parseOne(%q) = %q, %v", args, got, err)
		}
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	if _, err := parseOne(fs, []string{"a", "b"}, "FILE"); err == nil {
		t.Error("two positionals accepted")
	}
	if _, err := parseOne(fs, nil, "FILE"); err == nil || err.Error() != "FILE is missing" {
		t.Errorf("none: %v", err)
	}
}
