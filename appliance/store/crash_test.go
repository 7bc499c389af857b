package store

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The crash test runs this test binary again as a writer process
// (TestHelperProcess) and SIGKILLs it at random moments. The writer prints
// "INTENT <op>" before each operation and "DONE" after it returned, to an
// unbuffered stdout, so the parent knows which operations were acknowledged
// and which one (at most) was in flight when the kill landed. After each
// kill the parent reopens the database and checks that its state is exactly
// "all acknowledged operations" or "those plus the in-flight one", nothing
// in between and nothing lost.

const (
	crashHelperEnv = "OUTPOST_STORE_CRASH_HELPER"
	crashDBEnv     = "OUTPOST_STORE_CRASH_DB"
	crashSeedEnv   = "OUTPOST_STORE_CRASH_SEED"

	crashBindings = 500 // rows per SaveBindings (plus as many deletes) in the crash writer
)

// crashDoc returns a random document of 16–144 KiB (4–36 pages) for op n.
// Random bytes (from crypto/rand, which is fast even under -race) make any
// mix of pages from two different documents show up as a hash mismatch.
func crashDoc(r *rand.Rand, n int) []byte {
	doc := make([]byte, 16<<10+r.IntN(128<<10))
	crand.Read(doc)
	copy(doc, fmt.Sprintf(`{"op":%d,"pad":"`, n))
	return doc
}

// crashGenBindings are generation gen's bindings: the same crashBindings
// AORs every time, with a contact URI whose parity follows gen, so a
// generation replaces the previous one by deleting its keys and inserting
// new ones in one SaveBindings.
func crashGenBindings(gen int, exp time.Time) ([]Binding, []BindingKey) {
	ups := make([]Binding, crashBindings)
	dels := make([]BindingKey, crashBindings)
	for i := range ups {
		aor := fmt.Sprintf("sip:%d@crash", i)
		ups[i] = Binding{
			AOR: aor, ContactURI: fmt.Sprintf("sip:%d@10.1.%d.%d:5060;p=%d", i, i/250, i%250, gen%2),
			Contact: fmt.Sprintf("<sip:%d@10.1.0.1:5060>;expires=3600", i), Source: "udp:10.1.0.1:5060",
			Local: "udp:127.0.0.1:5060", CallID: fmt.Sprintf("gen-%d", gen), CSeq: uint32(gen), Q: -1,
			Expires: exp, Registered: exp.Add(-time.Hour), UserAgent: "crash-test",
		}
		dels[i] = BindingKey{aor, fmt.Sprintf("sip:%d@10.1.%d.%d:5060;p=%d", i, i/250, i%250, (gen+1)%2)}
	}
	return ups, dels
}

// TestHelperProcess is the writer for TestCrashDurability; it does nothing
// in a normal test run.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(crashHelperEnv) != "1" {
		t.Skip("helper process of TestCrashDurability: runs only when that test starts it")
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	seed, _ := strconv.ParseUint(os.Getenv(crashSeedEnv), 10, 64)
	r := rand.New(rand.NewPCG(seed, 1))
	ctx := context.Background()
	s, err := Open(ctx, os.Getenv(crashDBEnv))
	if err != nil {
		fail(err)
	}
	// Resume from the state the last run left.
	bs, err := s.LoadBindings(ctx, time.Now())
	if err != nil {
		fail(err)
	}
	gen := 0
	if len(bs) > 0 {
		gen = int(bs[0].CSeq)
	}
	h, err := s.History(ctx)
	if err != nil {
		fail(err)
	}
	maxV := int64(len(h))
	exp := time.Now().Add(24 * time.Hour)
	fmt.Println("READY")
	// Start the op cycle at a random point so that every kind of operation
	// gets acknowledged and interrupted, even when runs are short.
	for n := r.IntN(4); ; n++ {
		switch {
		case n%4 == 3 && maxV > 1:
			v := 1 + r.Int64N(maxV)
			fmt.Printf("INTENT activate %d\n", v)
			if err := s.Activate(ctx, v); err != nil {
				fail(err)
			}
		case n%4 == 2:
			gen++
			ups, dels := crashGenBindings(gen, exp)
			fmt.Printf("INTENT bindings %d\n", gen)
			if err := s.SaveBindings(ctx, ups, dels); err != nil {
				fail(err)
			}
		default:
			doc := crashDoc(r, n)
			sum := sha256.Sum256(doc)
			fmt.Printf("INTENT apply %s\n", hex.EncodeToString(sum[:]))
			if _, err := s.ApplyConfig(ctx, doc, "crash"); err != nil {
				fail(err)
			}
			maxV++
		}
		fmt.Println("DONE")
	}
}

// crashModel is what the parent knows the database must contain.
type crashModel struct {
	shas   []string // shas[v-1] is version v's document hash
	active int64
	gen    int
}

func (m crashModel) apply(op string) (crashModel, error) {
	f := strings.Fields(op)
	if len(f) != 2 {
		return m, fmt.Errorf("bad op %q", op)
	}
	switch f[0] {
	case "apply":
		m.shas = append(m.shas[:len(m.shas):len(m.shas)], f[1])
		m.active = int64(len(m.shas))
	case "activate":
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return m, err
		}
		m.active = v
	case "bindings":
		g, err := strconv.Atoi(f[1])
		if err != nil {
			return m, err
		}
		m.gen = g
	default:
		return m, fmt.Errorf("bad op %q", op)
	}
	return m, nil
}

// observe reads the database state and checks its internal invariants:
// contiguous history, one active version, document hashes, and that the
// bindings are exactly one generation. Documents of versions >= checkFrom
// (and the active one) are re-hashed.
func observe(ctx context.Context, s *Store, checkFrom int64) (crashModel, error) {
	var m crashModel
	var ok string
	if err := s.db.QueryRowContext(ctx, "PRAGMA quick_check").Scan(&ok); err != nil || ok != "ok" {
		return m, fmt.Errorf("quick_check: %q %v", ok, err)
	}
	h, err := s.History(ctx)
	if err != nil {
		return m, err
	}
	if err := checkHistory(h); err != nil {
		return m, err
	}
	m.shas = make([]string, len(h))
	for _, v := range h {
		m.shas[v.Version-1] = v.SHA256
		if v.Active {
			m.active = v.Version
		}
	}
	if len(h) > 0 {
		av, doc, err := s.ActiveConfig(ctx)
		if err != nil {
			return m, fmt.Errorf("ActiveConfig: %w", err)
		}
		if av.Version != m.active || sha(doc) != av.SHA256 {
			return m, fmt.Errorf("active config %d: document hashes to %s, row says %s", av.Version, sha(doc), av.SHA256)
		}
	} else if _, _, err := s.ActiveConfig(ctx); !errors.Is(err, ErrNotFound) {
		return m, fmt.Errorf("ActiveConfig on empty history: %v", err)
	}
	for v := max(checkFrom, 1); v <= int64(len(h)); v++ {
		cv, doc, err := s.Config(ctx, v)
		if err != nil {
			return m, fmt.Errorf("Config(%d): %w", v, err)
		}
		if sha(doc) != cv.SHA256 {
			return m, fmt.Errorf("version %d: document hashes to %s, row says %s", v, sha(doc), cv.SHA256)
		}
	}
	bs, err := s.LoadBindings(ctx, time.Now())
	if err != nil {
		return m, err
	}
	if len(bs) > 0 {
		m.gen = int(bs[0].CSeq)
		if len(bs) != crashBindings {
			return m, fmt.Errorf("%d bindings, want 0 or %d (a SaveBindings was torn)", len(bs), crashBindings)
		}
		for _, b := range bs {
			if int(b.CSeq) != m.gen || b.CallID != fmt.Sprintf("gen-%d", m.gen) || !strings.HasSuffix(b.ContactURI, fmt.Sprintf(";p=%d", m.gen%2)) {
				return m, fmt.Errorf("bindings mix generations: %+v in generation %d", b, m.gen)
			}
		}
	}
	return m, nil
}

func equalModel(a, b crashModel) bool {
	return a.active == b.active && a.gen == b.gen && strings.Join(a.shas, ",") == strings.Join(b.shas, ",")
}

func TestCrashDurability(t *testing.T) {
	if os.Getenv(crashHelperEnv) != "" {
		t.Skip("running as TestCrashDurability's helper process, which only writes")
	}
	kills := 25
	if testing.Short() {
		kills = 6
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "crash", "outpost.db")
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))

	var known crashModel // acknowledged state
	var done, inflight, early, landed int
	inflightKinds := map[string]int{}
	start := time.Now()
	for run := range kills {
		// Stay within ~20 s on a loaded machine (or under -race): stop
		// early once 20 kills are done and the budget is spent.
		if run >= 20 && time.Since(start) > 15*time.Second {
			kills = run
			break
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashHelperEnv+"=1", crashDBEnv+"="+path,
			fmt.Sprintf("%s=%d", crashSeedEnv, seed+uint64(run)))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1024)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()

		// Every fifth run is killed at a random moment after start, which
		// may land in Open (WAL recovery, migrations on the first run); the
		// others after the writer reported READY, i.e. mid-write.
		var got []string
		delay := time.Duration(r.IntN(301)) * time.Millisecond
		if run%5 == 0 {
			early++
			time.Sleep(delay)
		} else {
			timeout := time.After(20 * time.Second)
		wait:
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						cmd.Wait()
						t.Fatalf("run %d: helper exited before READY: %s", run, stderr.String())
					}
					got = append(got, l)
					if l == "READY" {
						break wait
					}
				case <-timeout:
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("run %d: helper not READY after 20s: %s", run, stderr.String())
				}
			}
			time.Sleep(delay)
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("run %d: kill: %v", run, err)
		}
		for l := range lines {
			got = append(got, l)
		}
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("run %d: helper did not die of SIGKILL (%v); it failed on its own? stderr:\n%s", run, err, stderr.String())
		}

		// Replay the helper's report onto the model.
		var pending string
		for _, l := range got {
			switch {
			case strings.HasPrefix(l, "INTENT "):
				pending = strings.TrimPrefix(l, "INTENT ")
			case l == "DONE":
				if known, err = known.apply(pending); err != nil {
					t.Fatal(err)
				}
				pending = ""
				done++
			}
		}
		alt := known
		if pending != "" {
			inflight++
			inflightKinds[strings.Fields(pending)[0]]++
			if alt, err = known.apply(pending); err != nil {
				t.Fatal(err)
			}
		}

		s, err := Open(ctx, path)
		if err != nil {
			t.Fatalf("run %d (killed after %v): Open after kill: %v", run, delay, err)
		}
		obs, err := observe(ctx, s, int64(len(known.shas)))
		s.Close()
		if err != nil {
			t.Fatalf("run %d (killed after %v): %v", run, delay, err)
		}
		switch {
		case equalModel(obs, known):
		case pending != "" && equalModel(obs, alt):
			known = alt // the in-flight operation had committed
			landed++
		default:
			t.Fatalf("run %d (killed after %v, in flight %q): database holds versions=%d active=%d gen=%d; acknowledged state is versions=%d active=%d gen=%d",
				run, delay, pending, len(obs.shas), obs.active, obs.gen, len(known.shas), known.active, known.gen)
		}
	}

	// Final full check: every document, full integrity_check.
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := observe(ctx, s, 1); err != nil {
		t.Fatal(err)
	}
	var ic string
	if err := s.db.QueryRow("PRAGMA integrity_check").Scan(&ic); err != nil || ic != "ok" {
		t.Fatalf("integrity_check: %q %v", ic, err)
	}
	fi, _ := os.Stat(path)
	t.Logf("%d kills (%d before READY) in %v: %d acknowledged operations; %d kills with an operation in flight %v, of which %d had committed; %d versions, binding generation %d, db %d MiB",
		kills, early, time.Since(start).Round(time.Millisecond), done, inflight, inflightKinds, landed, len(known.shas), known.gen, fi.Size()>>20)
	if done == 0 || inflight == 0 {
		t.Fatalf("the kills did not exercise writes (done=%d inflight=%d)", done, inflight)
	}
}
