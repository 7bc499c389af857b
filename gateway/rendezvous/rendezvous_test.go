package rendezvous

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// The hash is part of the contract between boxes (a pool's members, a
// branch and HQ's registrars): pin it.
func TestScorePinned(t *testing.T) {
	if got := Score("sip:1001@branch7.example", "198.18.1.10:5060"); got != 0xce69954f2ca3706e {
		t.Fatalf("Score = %#x: the hash changed, and with it every user's order", got)
	}
}

// TestOrderTable fixes the order of a known pool for known users: every
// member computes this same table from the same document. The orders
// were also computed independently (Python hashlib).
func TestOrderTable(t *testing.T) {
	pool := []string{"box-a", "box-b", "box-c"}
	want := map[string]string{
		"sip:1001@branch.example": "box-b box-a box-c",
		"sip:1002@branch.example": "box-c box-b box-a",
		"sip:1003@branch.example": "box-a box-b box-c",
		"sip:1004@branch.example": "box-c box-a box-b",
		"sip:1005@branch.example": "box-b box-a box-c",
		"sip:1006@branch.example": "box-b box-c box-a",
	}
	for key, w := range want {
		got := strings.Join(Order(key, pool), " ")
		if got != w {
			t.Errorf("Order(%q) = %s, want %s", key, got, w)
		}
		// The order of the members in the document does not matter.
		rev := slices.Clone(pool)
		slices.Reverse(rev)
		if got := strings.Join(Order(key, rev), " "); got != w {
			t.Errorf("Order(%q, reversed) = %s, want %s", key, got, w)
		}
	}
}

func TestOrderDuplicates(t *testing.T) {
	got := Order("k", []string{"a", "b", "a"})
	if len(got) != 2 {
		t.Fatalf("Order with a duplicate = %v", got)
	}
	if Order("k", nil) == nil || len(Order("k", nil)) != 0 {
		t.Fatalf("Order of no nodes = %v, want empty", Order("k", nil))
	}
}

// TestStability adds a member to a pool of three and removes one: only
// about 1/4 of the users move to the new member (and nowhere else), and
// removing a member moves only its own users; every other user keeps the
// relative order of the old members.
func TestStability(t *testing.T) {
	const users = 10000
	old := []string{"box-a", "box-b", "box-c"}
	grown := append(slices.Clone(old), "box-d")
	moved := 0
	for i := range users {
		key := fmt.Sprintf("sip:%d@branch.example", 1000+i)
		before, after := Order(key, old), Order(key, grown)
		if before[0] != after[0] {
			moved++
			if after[0] != "box-d" {
				t.Fatalf("%s moved from %s to %s, not to the new member", key, before[0], after[0])
			}
		}
		if kept := slices.DeleteFunc(slices.Clone(after), func(n string) bool { return n == "box-d" }); !slices.Equal(kept, before) {
			t.Fatalf("%s: order of the old members changed: %v -> %v", key, before, kept)
		}
		shrunk := Order(key, old[1:]) // box-a removed
		if before[0] != "box-a" && shrunk[0] != before[0] {
			t.Fatalf("%s (primary %s) moved when box-a left", key, before[0])
		}
		if before[0] == "box-a" && shrunk[0] != before[1] {
			t.Fatalf("%s moved to %s, not to its first backup %s", key, shrunk[0], before[1])
		}
	}
	share := float64(moved) / users
	t.Logf("adding a 4th member moved %.1f%% of %d users (ideal 25%%)", 100*share, users)
	if math.Abs(share-0.25) > 0.02 {
		t.Fatalf("adding a member moved %.3f of the users, want about 1/4", share)
	}
}
