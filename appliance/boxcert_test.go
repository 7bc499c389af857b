package appliance

import (
	"os"
	"path/filepath"
	"testing"
)

// The box certificate is made once and read back unchanged afterwards
// (phones that pinned it keep trusting the box); its key is private.
func TestBoxCertificatePersists(t *testing.T) {
	dir := t.TempDir()
	first, err := boxCertificate(dir, "box1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := boxCertificate(dir, "other")
	if err != nil {
		t.Fatal(err)
	}
	if first != again {
		t.Fatal("a second boot made a new certificate")
	}
	fi, err := os.Stat(filepath.Join(dir, BoxKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	os.WriteFile(filepath.Join(dir, BoxKeyFile), []byte("garbage"), 0o600)
	if _, err := boxCertificate(dir, "box1"); err == nil {
		t.Fatal("a damaged key was accepted")
	}
}
