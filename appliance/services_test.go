package appliance

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/outpost/outpost/appliance/config"
	"github.com/outpost/outpost/appliance/store"
	"github.com/outpost/outpost/gateway/b2bua"
)

// A phone's setting stands over the document until a push changes that
// field, and survives a restart (a new store on the same file).
func TestPhoneSettingsOverTheDocument(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outpost.db")
	st, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	us, err := loadUserServices(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	doc := func(busy string) docServices {
		return servicesOf(&config.Document{Users: []config.User{
			{Extension: "1001", Forward: &config.Forward{Busy: busy}},
			{Extension: "1002"},
		}})
	}
	v1 := us.under(doc("2000"))
	if err := v1.SetService("1001", b2bua.ServiceChange{Feature: b2bua.FeatureForwardBusy, Number: "1002"}); err != nil {
		t.Fatal(err)
	}
	if err := v1.SetService("1001", b2bua.ServiceChange{Feature: b2bua.FeatureDND, On: true}); err != nil {
		t.Fatal(err)
	}
	if err := v1.SetService("9999", b2bua.ServiceChange{Feature: b2bua.FeatureDND, On: true}); !errors.Is(err, b2bua.ErrNotLocal) {
		t.Errorf("a stranger's setting: %v, want ErrNotLocal", err)
	}
	if got := v1.Services("1001"); got.ForwardBusy != "1002" || !got.DND {
		t.Errorf("after the phone's settings: %+v", got)
	}
	st.Close()

	if st, err = store.Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if us, err = loadUserServices(ctx, st); err != nil {
		t.Fatal(err)
	}
	if got := us.under(doc("2000")).Services("1001"); got.ForwardBusy != "1002" || !got.DND {
		t.Errorf("after a restart: %+v", got)
	}
	// A push changing forward.busy wins over the phone; DND, untouched
	// by the push, keeps the phone's setting.
	v2 := us.under(doc("3000"))
	if got := v2.Services("1001"); got.ForwardBusy != "3000" || !got.DND {
		t.Errorf("after a push of forward.busy: %+v", got)
	}
	if l := v2.list(); len(l) != 1 || l[0].Extension != "1001" || len(l[0].FromPhone) != 1 || l[0].FromPhone[0] != b2bua.FeatureDND {
		t.Errorf("list %+v, want 1001 with DND from the phone", l)
	}
}
