package registrar

import (
	"sync/atomic"
	"testing"
)

// TestRedirect: a pool member that is not the user's home answers 301
// with the home's Contact, at once when it holds no binding of the user;
// when it holds one (failback) only after the credentials verify, and then
// it drops the binding.
func TestRedirect(t *testing.T) {
	r, _ := newTestRegistrar(t, Config{}, nil)
	var away atomic.Bool
	r.SetRedirect(func(aor string) []string {
		if aor != "1001" || !away.Load() {
			return nil
		}
		return []string{"sip:198.18.60.2:5060", "sip:198.18.60.3:5060"}
	})
	m := msg{aor: "1001", contacts: []string{"<sip:1001@198.18.0.10:5060>"}, expires: "600"}

	away.Store(true)
	res := r.HandleRegister(m.request(t), "udp:127.0.0.1:5060")
	if cs := contactsOf(res); res.StatusCode != 301 || len(cs) != 2 || cs[0] != "<sip:198.18.60.2:5060>;q=1.0" || cs[1] != "<sip:198.18.60.3:5060>;q=0.5" {
		t.Fatalf("REGISTER for a user homed elsewhere: %d %v", res.StatusCode, contactsOf(res))
	}
	if got := register(t, r, msg{aor: "1002", contacts: []string{"<sip:1002@198.18.0.11:5060>"}}, "pw1002"); got.StatusCode != 200 {
		t.Fatalf("user homed here: %d", got.StatusCode)
	}

	// The home is down: this box (its backup) takes the user.
	away.Store(false)
	if res := register(t, r, m, "pw1001"); res.StatusCode != 200 {
		t.Fatalf("REGISTER with the home down: %d", res.StatusCode)
	}
	// The home is back: a refresh without credentials is challenged (a
	// binding is held), a wrong password is refused and keeps it.
	away.Store(true)
	m.callID = "call-2"
	res = r.HandleRegister(m.request(t), "udp:127.0.0.1:5060")
	if res.StatusCode != 401 {
		t.Fatalf("unauthenticated refresh of a held binding: %d, want 401", res.StatusCode)
	}
	if res := register(t, r, m, "wrong"); res.StatusCode == 301 || len(r.Lookup("1001")) != 1 {
		t.Fatalf("wrong password: %d, bindings %d", res.StatusCode, len(r.Lookup("1001")))
	}
	m.callID = "call-3"
	if res := register(t, r, m, "pw1001"); res.StatusCode != 301 {
		t.Fatalf("authenticated refresh at the backup after failback: %d, want 301", res.StatusCode)
	}
	if n := len(r.Lookup("1001")); n != 0 {
		t.Fatalf("backup kept %d bindings after failback", n)
	}
	if st := r.Stats(); st.Redirected != 2 || st.HandedOver != 1 {
		t.Fatalf("stats = %+v", st)
	}
}
