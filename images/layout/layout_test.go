package layout

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outpost/outpost/internal/testenv"
)

func TestEnvRoundTripAndGrubEditenv(t *testing.T) {
	b, err := FactoryEnv().Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != EnvSize || !bytes.HasPrefix(b, []byte("# GRUB Environment Block\nslot=A\n#")) {
		t.Fatalf("factory block: %q", b[:40])
	}
	e, err := ParseEnv(b)
	if err != nil || e[KeySlot] != "A" || len(e) != 1 {
		t.Fatalf("ParseEnv = %v, %v", e, err)
	}
	if _, err := ParseEnv(b[:100]); !errors.Is(err, ErrEnv) {
		t.Errorf("short block: %v", err)
	}
	// GRUB's own tool must read what Encode writes, and ParseEnv what it writes.
	ge := testenv.NeedTool(t, "grub-editenv")
	f := filepath.Join(t.TempDir(), "grubenv")
	for _, args := range [][]string{{"create"}, {"set", "next=B", "slot=A", "upgrade=1"}} {
		if out, err := exec.Command(ge, append([]string{f}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("grub-editenv %v: %v %s", args, err, out)
		}
	}
	theirs, _ := os.ReadFile(f)
	if e, err := ParseEnv(theirs); err != nil || e[KeySlot] != "A" || e[KeyNext] != "B" || e[KeyUpgrade] != "1" || len(e) != 3 {
		t.Errorf("ParseEnv(grub-editenv's block) = %v, %v", e, err)
	}
	ours, _ := Env{KeySlot: "B", KeyFailed: "A"}.Encode()
	os.WriteFile(f, ours, 0o644)
	out, err := exec.Command(ge, f, "list").CombinedOutput()
	if err != nil || string(out) != "failed=A\nslot=B\n" {
		t.Errorf("grub-editenv list of our block: %q, %v", out, err)
	}
}

func TestEnvRefusesUnencodable(t *testing.T) {
	for _, e := range []Env{{"a": "x\ny"}, {"a=b": "c"}, {"a": `back\slash`}, {"big": strings.Repeat("x", EnvSize)}} {
		if _, err := e.Encode(); err == nil {
			t.Errorf("Encode(%q) succeeded", e)
		}
	}
}

// The life of a box: an update that becomes healthy, then one that does not.
func TestUpdateCommitAndRollback(t *testing.T) {
	env := FactoryEnv()
	boot, env := env.Boot()
	if boot != (Boot{Slot: SlotA}) {
		t.Fatalf("factory boots %+v", boot)
	}
	if _, err := env.StartTrial(SlotA); err == nil {
		t.Fatal("StartTrial of the committed slot succeeded")
	}
	env, err := env.StartTrial(SlotB)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := env.Pending(); !ok || s != SlotB {
		t.Fatalf("pending = %v %v", s, ok)
	}
	boot, env = env.Boot()
	if boot != (Boot{Slot: SlotB, Trial: true}) || env[KeyUpgrade] != "0" {
		t.Fatalf("trial boot %+v, env %v", boot, env)
	}
	env, out := env.Confirm(boot)
	if out != Committed || env.Committed() != SlotB || env[KeyNext] != "" {
		t.Fatalf("confirm: %v %v", out, env)
	}
	if b, _ := env.Boot(); b != (Boot{Slot: SlotB}) {
		t.Fatalf("after commit boots %+v", b)
	}

	// Second update, to A: its trial never confirms; the next boot is B.
	env, _ = env.StartTrial(SlotA)
	boot, env = env.Boot()
	if boot != (Boot{Slot: SlotA, Trial: true}) {
		t.Fatalf("second trial %+v", boot)
	}
	boot, env = env.Boot() // the trial died before Confirm
	if boot != (Boot{Slot: SlotB}) {
		t.Fatalf("after a failed trial boots %+v, want committed B", boot)
	}
	env, out = env.Confirm(boot)
	if out != RolledBack || env[KeyFailed] != "A" || env[KeyNext] != "" || env.Committed() != SlotB {
		t.Fatalf("rollback: %v %v", out, env)
	}
	if _, out = env.Confirm(boot); out != Unchanged {
		t.Fatalf("second confirm: %v", out)
	}
}

func TestParseCmdline(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Boot
		ok   bool
	}{
		{"root=PARTLABEL=rootB outpost.slot=B outpost.trial=1 quiet", Boot{SlotB, true}, true},
		{"outpost.slot=a outpost.trial=0", Boot{SlotA, false}, true},
		{"quiet root=/dev/vda", Boot{}, false},
		{"outpost.slot=C", Boot{}, false},
	} {
		got, ok := ParseCmdline(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseCmdline(%q) = %+v %v, want %+v %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func testKey(t *testing.T) (ed25519.PrivateKey, ed25519.PublicKey) {
	t.Helper()
	privPEM, pubPEM, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	priv, err := ParsePrivateKey(privPEM)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

func bundle(t *testing.T, key ed25519.PrivateKey, arch string, payload []byte) []byte {
	t.Helper()
	n, sum, _ := HashPayload(bytes.NewReader(payload))
	var b bytes.Buffer
	m := Manifest{Arch: arch, Version: "1.2.3", Created: 1767225600, Payload: Payload{Size: n, SHA256: sum}}
	if err := WriteBundle(&b, m, bytes.NewReader(payload), key); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// readAll reads a bundle as the box does: manifest, check, payload to EOF.
func readAll(data []byte, pub ed25519.PublicKey, arch string) ([]byte, error) {
	r := bytes.NewReader(data)
	m, err := ReadManifest(r, pub)
	if err != nil {
		return nil, err
	}
	if err := m.Check(arch); err != nil {
		return nil, err
	}
	return io.ReadAll(m.PayloadReader(r))
}

func TestBundle(t *testing.T) {
	priv, pub := testKey(t)
	otherPriv, _ := testKey(t)
	payload := bytes.Repeat([]byte("squashfs"), 100000)
	good := bundle(t, priv, "arm64", payload)

	got, err := readAll(good, pub, "arm64")
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("good bundle: %v (%d bytes)", err, len(got))
	}
	flip := func(b []byte, i int) []byte { c := bytes.Clone(b); c[i] ^= 1; return c }
	hdr := len(good) - len(payload)
	for _, c := range []struct {
		name string
		data []byte
		arch string
		want error
	}{
		{"foreign key", bundle(t, otherPriv, "arm64", payload), "arm64", ErrSignature},
		{"altered manifest", flip(good, 30), "arm64", ErrSignature},
		{"altered signature", flip(good, hdr-1), "arm64", ErrSignature},
		{"wrong arch", good, "amd64", ErrArch},
		{"truncated payload", good[:len(good)-1], "arm64", ErrTruncated},
		{"truncated header", good[:40], "arm64", ErrTruncated},
		{"altered payload", flip(good, len(good)-5), "arm64", ErrDigest},
		{"trailing data", append(bytes.Clone(good), 'x'), "arm64", ErrTrailing},
		{"not a bundle", []byte("PK\x03\x04 zip file, not a bundle at all"), "arm64", ErrFormat},
	} {
		_, err := readAll(c.data, pub, c.arch)
		if !errors.Is(err, c.want) || !errors.Is(err, ErrBundle) {
			t.Errorf("%s: err = %v, want %v (and ErrBundle)", c.name, err, c.want)
		}
	}
	big := Manifest{Arch: "arm64", Layout: DiskUUID, Payload: Payload{Size: SlotSize() + 1}}
	if err := big.Check("arm64"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized payload: %v", err)
	}
	other := Manifest{Arch: "arm64", Layout: "another-layout", Payload: Payload{Size: 1}}
	if err := other.Check("arm64"); !errors.Is(err, ErrLayout) {
		t.Errorf("other layout: %v", err)
	}
}

func TestLayoutIsConsistent(t *testing.T) {
	seen := map[string]bool{}
	for i, p := range Partitions {
		if p.Number != i+1 || p.Size%MiB != 0 || seen[p.UUID] {
			t.Errorf("partition %+v", p)
		}
		seen[p.UUID] = true
	}
	a, _ := Lookup(RootA)
	b, _ := Lookup(RootB)
	if a.Size != b.Size || SlotA.Partition() != RootA || SlotB.Partition() != RootB || SlotA.Other() != SlotB {
		t.Error("slots A and B differ")
	}
}
