package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadLimit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, v string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := readLimit(dir); got != 0 {
		t.Fatalf("no files: %v", got)
	}
	write("cpu.cfs_quota_us", "-1\n")
	write("cpu.cfs_period_us", "100000\n")
	if got := readLimit(dir); got != 0 {
		t.Fatalf("v1 unlimited: %v", got)
	}
	write("cpu.cfs_quota_us", "50000\n")
	if got := readLimit(dir); got != 0.5 {
		t.Fatalf("v1 half: %v", got)
	}
	write("cpu.max", "max 100000\n")
	if got := readLimit(dir); got != 0 {
		t.Fatalf("v2 max: %v", got)
	}
	write("cpu.max", "150000 100000\n")
	if got := readLimit(dir); got != 1.5 {
		t.Fatalf("v2 1.5: %v", got)
	}
}
