package netcfg

import (
	"testing"
	"testing/synctest"
	"time"
)

func TestDebounce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := Debounce{Delay: 100 * time.Millisecond}
		if d.C() != nil {
			t.Fatal("a new Debounce is pending")
		}
		start := time.Now()
		d.Hint()
		time.Sleep(60 * time.Millisecond) // fake clock: within the cool-down
		d.Hint()                          // covered by the first
		<-d.C()
		if el := time.Since(start); el != 100*time.Millisecond {
			t.Fatalf("woke after %v, want the first hint's 100ms", el)
		}
		d.Fired()
		if d.C() != nil {
			t.Fatal("pending after Fired")
		}
		d.Hint()
		at := time.Now()
		<-d.C()
		if el := time.Since(at); el != 100*time.Millisecond {
			t.Fatalf("second burst woke after %v", el)
		}
	})
}
