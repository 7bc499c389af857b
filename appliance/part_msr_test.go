package appliance

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/media/selection"
)

// outpostctl media-resources set MSR inactive: the API call marks the
// MSR's resources inactive in the table GET /api/v1/media-resources shows,
// and selection never picks them until they are made active again.
func TestMediaResourceSetInactive(t *testing.T) {
	a := startApp(t, encode(t, testDoc(t)))
	for i, name := range []string{"msr-a", "msr-b"} {
		a.msr.table.Upsert(selection.Entry{MSR: name, Interface: "lan0", Addr: netip.AddrFrom4([4]byte{198, 18, byte(i), 1}),
			Registered: true, Expires: time.Now().Add(time.Hour)})
	}
	h := api.Handler(a, slog.New(slog.DiscardHandler), nil)
	post := func(name, body string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/media-resources/"+name, strings.NewReader(body)))
		return rec.Code
	}
	if code := post("msr-a", `{"active": false}`); code != http.StatusOK {
		t.Fatalf("POST msr-a inactive = %d", code)
	}
	if code := post("nobody", `{"active": false}`); code != http.StatusNotFound {
		t.Errorf("POST unknown MSR = %d, want 404", code)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/media-resources", nil))
	var m api.MediaResources
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	active := map[string]bool{}
	for _, r := range m.Resources {
		active[r.MSR] = r.Active
	}
	if a, b := active["msr-a"], active["msr-b"]; a || !b || len(active) != 2 {
		t.Fatalf("table after set msr-a inactive: %+v", m.Resources)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		if e, err := a.msr.table.Select(selection.Request{}, rnd); err != nil || e.MSR != "msr-b" {
			t.Fatalf("selected %+v, %v; want msr-b only", e, err)
		}
	}
	// A re-REGISTER keeps the flag; making it active again lets it win.
	a.msr.table.Upsert(selection.Entry{MSR: "msr-a", Interface: "lan0", Addr: netip.AddrFrom4([4]byte{198, 18, 0, 1}),
		Registered: true, Expires: time.Now().Add(time.Hour)})
	if st, err := a.SetMediaResourceActive(context.Background(), "msr-a", true); err != nil || !st.Active || st.Resources != 1 || !st.Persistent {
		t.Fatalf("set msr-a active: %+v %v", st, err)
	}
	seen := map[string]bool{}
	for range 200 {
		e, err := a.msr.table.Select(selection.Request{}, rnd)
		if err != nil {
			t.Fatal(err)
		}
		seen[e.MSR] = true
	}
	if !seen["msr-a"] || !seen["msr-b"] {
		t.Errorf("after set active, chosen: %v", seen)
	}
	// The box's own MSR name is known (host name, as msr.name is empty).
	if _, err := a.SetMediaResourceActive(context.Background(), a.running().parts.MSR.Name, false); err != nil {
		t.Errorf("own name %q: %v", a.running().parts.MSR.Name, err)
	}
}
