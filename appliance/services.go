package appliance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/outpost/outpost/appliance/config"
	"github.com/outpost/outpost/appliance/store"
	"github.com/outpost/outpost/gateway/b2bua"
)

// userServices are the users' do-not-disturb and forwards: the
// document's, under what phones set by feature codes (kept in the store,
// so a restart keeps them). A phone's setting stands until the user
// changes it again or a push changes that field of the document: each
// stored setting remembers the document value it was made over (its
// base), and counts only while the document still says that. The rule
// needs no step at apply time, so a push that is prepared and then
// aborted changes nothing.
type userServices struct {
	st *store.Store

	mu  sync.Mutex
	set map[serviceKey]store.ServiceSetting // the store's rows
}

type serviceKey struct {
	ext     string
	feature b2bua.Feature
}

// loadUserServices reads what phones set, before the gateway starts.
func loadUserServices(ctx context.Context, st *store.Store) (*userServices, error) {
	rows, err := st.Services(ctx)
	if err != nil {
		return nil, err
	}
	us := &userServices{st: st, set: make(map[serviceKey]store.ServiceSetting, len(rows))}
	for _, r := range rows {
		us.set[serviceKey{r.Extension, b2bua.Feature(r.Feature)}] = r
	}
	return us, nil
}

// docServices are the document's services of one push, by extension (a
// local user without any is present with the zero Services).
type docServices map[string]b2bua.Services

// servicesOf reads the document's services (pure: translate).
func servicesOf(d *config.Document) docServices {
	out := make(docServices, len(d.Users))
	for _, u := range d.Users {
		sv := b2bua.Services{DND: u.DND}
		if f := u.Forward; f != nil {
			sv.ForwardAlways, sv.ForwardBusy, sv.ForwardNoAnswer = f.Always, f.Busy, f.NoAnswer
			sv.NoAnswerAfter = time.Duration(f.NoAnswerS) * time.Second
		}
		out[u.Extension] = sv
	}
	return out
}

// under is the b2bua.ServiceStore of one push: its document's services
// with the phones' settings over them.
func (us *userServices) under(doc docServices) servicesView {
	return servicesView{us: us, doc: doc}
}

type servicesView struct {
	us  *userServices
	doc docServices
}

// value is a feature's setting as text: "on"/"off" for DND, the number
// ("" = off) for a forward.
func value(sv b2bua.Services, f b2bua.Feature) string {
	switch f {
	case b2bua.FeatureDND:
		if sv.DND {
			return "on"
		}
		return "off"
	case b2bua.FeatureForwardAlways:
		return sv.ForwardAlways
	case b2bua.FeatureForwardBusy:
		return sv.ForwardBusy
	case b2bua.FeatureForwardNoAnswer:
		return sv.ForwardNoAnswer
	}
	return ""
}

func setValue(sv *b2bua.Services, f b2bua.Feature, v string) {
	switch f {
	case b2bua.FeatureDND:
		sv.DND = v == "on"
	case b2bua.FeatureForwardAlways:
		sv.ForwardAlways = v
	case b2bua.FeatureForwardBusy:
		sv.ForwardBusy = v
	case b2bua.FeatureForwardNoAnswer:
		sv.ForwardNoAnswer = v
	}
}

var features = []b2bua.Feature{b2bua.FeatureDND, b2bua.FeatureForwardAlways, b2bua.FeatureForwardBusy, b2bua.FeatureForwardNoAnswer}

func (v servicesView) Services(ext string) b2bua.Services {
	sv, ok := v.doc[ext]
	if !ok {
		return b2bua.Services{}
	}
	v.us.mu.Lock()
	defer v.us.mu.Unlock()
	base := sv
	for _, f := range features {
		if r, ok := v.us.set[serviceKey{ext, f}]; ok && r.Base == value(base, f) {
			setValue(&sv, f, r.Value)
		}
	}
	return sv
}

func (v servicesView) IsUser(ext string) bool {
	_, ok := v.doc[ext]
	return ok
}

func (v servicesView) SetService(ext string, ch b2bua.ServiceChange) error {
	docSv, ok := v.doc[ext]
	if !ok {
		return b2bua.ErrNotLocal
	}
	var next b2bua.Services
	if ch.Feature == b2bua.FeatureDND {
		next.DND = ch.On
	} else {
		setValue(&next, ch.Feature, ch.Number)
	}
	r := store.ServiceSetting{Extension: ext, Feature: string(ch.Feature), Value: value(next, ch.Feature),
		Base: value(docSv, ch.Feature), Set: time.Now()}
	// Written before it counts: a setting the phone was told about
	// survives a power cut.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := v.us.st.SetService(ctx, r); err != nil {
		return fmt.Errorf("user services: %w", err)
	}
	v.us.mu.Lock()
	v.us.set[serviceKey{ext, ch.Feature}] = r
	v.us.mu.Unlock()
	return nil
}

// serviceState is one user's services in force, and those of them in
// which a phone's setting differs from the document (the status page,
// outpostctl services).
type serviceState struct {
	Extension string
	b2bua.Services
	FromPhone []b2bua.Feature
}

// list is every user's services in force, in extension order, for
// those with any set.
func (v servicesView) list() []serviceState {
	var out []serviceState
	for ext := range v.doc {
		sv := v.Services(ext)
		st := serviceState{Extension: ext, Services: sv}
		v.us.mu.Lock()
		for _, f := range features {
			if r, ok := v.us.set[serviceKey{ext, f}]; ok && r.Base == value(v.doc[ext], f) && r.Value != r.Base {
				st.FromPhone = append(st.FromPhone, f)
			}
		}
		v.us.mu.Unlock()
		if sv != (b2bua.Services{}) {
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b serviceState) int { return strings.Compare(a.Extension, b.Extension) })
	return out
}
