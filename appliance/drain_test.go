package appliance

import (
	"testing"
	"time"
)

// TestDrainVerb: outpostctl drain's backend. With no call in progress a
// waiting drain returns at once; status and the answer say draining until
// the document's drain time; cancelling takes new calls again.
func TestDrainVerb(t *testing.T) {
	d := testDoc(t)
	d["sip"].(map[string]any)["drain_s"] = 120
	a := startApp(t, encode(t, d))
	start := time.Now()
	st, err := a.Drain(t.Context(), true, true)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Draining || st.Calls != 0 || st.Until.Sub(start) < 119*time.Second || st.Until.Sub(start) > 121*time.Second {
		t.Errorf("drain answer %+v; want draining for 120 s with no call", st)
	}
	if s := a.Status(t.Context()); !s.Draining || !s.DrainUntil.Equal(st.Until.UTC()) {
		t.Errorf("status while draining: draining %v until %v", s.Draining, s.DrainUntil)
	}
	again, _ := a.Drain(t.Context(), true, false)
	if !again.Until.Equal(st.Until) {
		t.Errorf("a second drain moved the deadline from %v to %v", st.Until, again.Until)
	}
	if st, _ := a.Drain(t.Context(), false, false); st.Draining {
		t.Errorf("after cancel: %+v", st)
	}
	if s := a.Status(t.Context()); s.Draining {
		t.Error("status still says draining after cancel")
	}
}
