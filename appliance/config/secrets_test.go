package config

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

func loadFile(t *testing.T, path string) *Document {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Load(data)
	if err != nil {
		t.Fatalf("%s:\n%s", path, errorLines(err))
	}
	return d
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// viaJSON sends a document over the wire, as outpostctl and HQ do.
func viaJSON(t *testing.T, d *Document) *Document {
	t.Helper()
	out, err := Parse([]byte(mustJSON(t, d)))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sealed(t *testing.T, d *Document, prev *Document) *Document {
	t.Helper()
	d = d.Clone()
	if err := d.Seal(prev); err != nil {
		t.Fatalf("Seal: %v", err)
	}
	return d
}

// secretsOf lists every secret a document (full.json) carries, in clear
// text or as HA1.
func secretsOf(d *Document) []string {
	var s []string
	for _, u := range d.Users {
		for _, v := range []string{u.Password, u.HA1MD5, u.HA1SHA256} {
			if v != "" && v != Redacted {
				s = append(s, v)
			}
		}
	}
	for _, v := range []string{d.HQ.AuthPassword, d.MSR.Password, d.Management.KeyPEM} {
		if v != "" && v != Redacted {
			s = append(s, v)
		}
	}
	return s
}

func TestSealReplacesPasswords(t *testing.T) {
	raw := loadFile(t, "testdata/valid/full.json")
	d := sealed(t, raw, nil)
	realm := d.SIP.EffectiveRealm(d.Site)
	out := mustJSON(t, d)
	for i, u := range d.Users {
		pw := raw.Users[i].Password
		if u.Password != "" {
			t.Errorf("users[%d] still has a password", i)
		}
		if strings.Contains(out, pw) {
			t.Errorf("sealed JSON contains the clear-text password of users[%d]", i)
		}
		if u.HA1MD5 != HA1("MD5", u.Extension, realm, pw) || u.HA1SHA256 != HA1("SHA-256", u.Extension, realm, pw) {
			t.Errorf("users[%d] HA1 wrong: %+v", i, u)
		}
	}
	// Other secrets are stored as given.
	if d.HQ.AuthPassword != "trunk-secret" || d.MSR.Password != "msr-secret" || d.Management.KeyPEM != raw.Management.KeyPEM {
		t.Error("Seal changed the other secrets")
	}
	if errs := d.Validate(); errs != nil {
		t.Errorf("sealed document does not validate: %v", errs)
	}
	roundTrip(t, d)
	// Sealing a stored document again changes nothing.
	again := sealed(t, d, d)
	if !reflect.DeepEqual(again, d) {
		t.Errorf("re-sealing changed the document:\n%s\n%s", mustJSON(t, again), out)
	}
	// And works without prev: the HA1s in the document are kept.
	if again := sealed(t, d, nil); !reflect.DeepEqual(again, d) {
		t.Error("sealing a stored document without prev changed it")
	}
}

func TestRedactHidesEverySecret(t *testing.T) {
	for _, f := range []string{"testdata/valid/full.json", "../../examples/branch.json"} {
		raw := loadFile(t, f)
		for _, d := range []*Document{raw, sealed(t, raw, nil)} {
			before := mustJSON(t, d)
			out := mustJSON(t, d.Redact())
			secrets := secretsOf(d)
			if len(secrets) == 0 {
				t.Fatalf("%s: no secrets to look for", f)
			}
			for _, s := range secrets {
				if strings.Contains(out, s) || strings.Contains(out, jsonEscaped(s)) {
					t.Errorf("%s: redacted output contains %q", f, s)
				}
			}
			for _, field := range []string{"ha1_md5", "ha1_sha256"} {
				if strings.Contains(out, field) {
					t.Errorf("%s: redacted output has %s", f, field)
				}
			}
			r := d.Redact()
			for i, u := range r.Users {
				if u.Password != Redacted {
					t.Errorf("%s: users[%d].password = %q, want %q", f, i, u.Password, Redacted)
				}
			}
			if r.HQ.AuthPassword != Redacted || r.MSR.Password != Redacted {
				t.Errorf("%s: hq/msr password not redacted", f)
			}
			if mustJSON(t, d) != before {
				t.Errorf("%s: Redact modified its receiver", f)
			}
			// The redacted document still validates (placeholders are accepted).
			if errs := viaJSON(t, r).Validate(); errs != nil {
				t.Errorf("%s: redacted document does not validate: %v", f, errs)
			}
		}
	}
	// Empty secrets stay empty; certificates are public.
	d := loadFile(t, "testdata/valid/minimal.json")
	d.Management.CertPEM = "cert"
	r := d.Redact()
	if r.HQ.AuthPassword != "" || r.MSR.Password != "" || r.Management.KeyPEM != "" || r.Management.CertPEM != "cert" {
		t.Errorf("Redact of empty secrets: %+v %+v %+v", r.HQ, r.MSR, r.Management)
	}
	if (*Document)(nil).Redact() != nil {
		t.Error("nil.Redact() != nil")
	}
}

func jsonEscaped(s string) string {
	b, _ := json.Marshal(s)
	return strings.Trim(string(b), `"`)
}

// TestSealRedactedKeepsStored is the outpostctl "config get → edit → config
// apply" loop: the redacted document comes back and keeps every secret.
func TestSealRedactedKeepsStored(t *testing.T) {
	prev := sealed(t, loadFile(t, "testdata/valid/full.json"), nil)
	in := viaJSON(t, prev.Redact())
	if errs := in.Validate(); errs != nil {
		t.Fatalf("redacted document does not validate: %v", errs)
	}
	if err := in.Seal(prev); err != nil {
		t.Fatalf("Seal: %v", err)
	}
	if !reflect.DeepEqual(in, prev) {
		t.Errorf("redacted document did not seal back to the stored one:\n%s\n%s", mustJSON(t, in), mustJSON(t, prev))
	}

	// An edit: one new password, one new user, other users untouched.
	in = viaJSON(t, prev.Redact())
	in.Users[0].Password = "a-new-password"
	in.Users = append(in.Users, User{Extension: "102", Password: "pw-102-long"})
	if err := in.Seal(prev); err != nil {
		t.Fatalf("Seal: %v", err)
	}
	realm := prev.SIP.EffectiveRealm(prev.Site)
	if in.Users[0].HA1MD5 != HA1("MD5", "100", realm, "a-new-password") || in.Users[0].Password != "" {
		t.Errorf("changed password not sealed: %+v", in.Users[0])
	}
	if !reflect.DeepEqual(in.Users[1], prev.Users[1]) || !reflect.DeepEqual(in.Users[2], prev.Users[2]) {
		t.Error("unchanged users lost their HA1s")
	}
	if in.Users[3].HA1SHA256 != HA1("SHA-256", "102", realm, "pw-102-long") {
		t.Errorf("new user not sealed: %+v", in.Users[3])
	}

	// "" where the section exists keeps the stored secret too.
	in = viaJSON(t, prev.Redact())
	in.HQ.AuthPassword, in.MSR.Password, in.Management.KeyPEM = "", "", ""
	for i := range in.Users {
		in.Users[i].Password = ""
	}
	if err := in.Seal(prev); err != nil {
		t.Fatalf("Seal: %v", err)
	}
	if !reflect.DeepEqual(in, prev) {
		t.Error(`"" secrets did not keep the stored values`)
	}

	// A new value replaces the stored one; a removed section drops it.
	in = viaJSON(t, prev.Redact())
	in.HQ.AuthPassword = "rotated"
	in.MSR = MSR{}
	if err := in.Seal(prev); err != nil {
		t.Fatalf("Seal: %v", err)
	}
	if in.HQ.AuthPassword != "rotated" || in.MSR.Password != "" {
		t.Errorf("hq.auth_password = %q, msr.password = %q", in.HQ.AuthPassword, in.MSR.Password)
	}
}

func sealErrors(t *testing.T, d, prev *Document) string {
	t.Helper()
	before := mustJSON(t, d)
	err := d.Seal(prev)
	if err == nil {
		t.Fatal("Seal succeeded, want an error")
	}
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Seal error is %T, not Errors", err)
	}
	if mustJSON(t, d) != before {
		t.Error("a failed Seal modified the document")
	}
	return errorLines(err)
}

func TestSealRealmChange(t *testing.T) {
	prev := sealed(t, loadFile(t, "../../examples/branch.json"), nil)

	in := viaJSON(t, prev.Redact())
	in.SIP.Realm = "new.example.com"
	want := `users[0].password: password required: realm changed
users[1].password: password required: realm changed
users[2].password: password required: realm changed
`
	if got := sealErrors(t, in, prev); got != want {
		t.Errorf("got\n%swant\n%s", got, want)
	}

	// The realm also follows site.domain when sip.realm is unset.
	in = viaJSON(t, prev.Redact())
	in.SIP.Realm = ""
	in.Site.Domain = "other.example.com"
	if got := sealErrors(t, in, prev); got != want {
		t.Errorf("got\n%swant\n%s", got, want)
	}

	// A stored document edited in place carries HA1s of the old realm.
	in = prev.Clone()
	in.SIP.Realm = "new.example.com"
	if got := sealErrors(t, in, prev); got != want {
		t.Errorf("got\n%swant\n%s", got, want)
	}

	// With every password given again, the realm may change.
	in = viaJSON(t, prev.Redact())
	in.SIP.Realm = "new.example.com"
	for i := range in.Users {
		in.Users[i].Password = "pw-" + in.Users[i].Extension
	}
	if err := in.Seal(prev); err != nil {
		t.Fatal(err)
	}
	if in.Users[0].HA1MD5 != HA1("MD5", "1001", "new.example.com", "pw-1001") {
		t.Error("HA1 not computed for the new realm")
	}
}

func TestSealErrors(t *testing.T) {
	prev := sealed(t, loadFile(t, "../../examples/branch.json"), nil)

	// Nothing to keep without a running document.
	in := viaJSON(t, prev.Redact())
	want := `users[0].password: password required: new user
users[1].password: password required: new user
users[2].password: password required: new user
hq.auth_password: <redacted> given but there is no stored value to keep
msr.password: <redacted> given but there is no stored value to keep
`
	if got := sealErrors(t, in, nil); got != want {
		t.Errorf("got\n%swant\n%s", got, want)
	}

	// A user the running document does not have.
	in = viaJSON(t, prev.Redact())
	in.Users[1].Extension = "1999"
	if got, want := sealErrors(t, in, prev), "users[1].password: password required: new user\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}

	// Redacted key with no stored key.
	in = viaJSON(t, prev.Redact())
	in.Management.KeyPEM = Redacted
	if got, want := sealErrors(t, in, prev), "management.key_pem: <redacted> given but there is no stored value to keep\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestSealFromUnsealedPrev(t *testing.T) {
	// The embedded default runs unsealed until the first push: a redacted
	// copy of it seals from its clear-text passwords, even across a realm
	// change.
	prev := Default()
	in := viaJSON(t, prev.Redact())
	in.SIP.Realm = "branch.example.com"
	if err := in.Seal(prev); err != nil {
		t.Fatal(err)
	}
	if in.Users[0].HA1MD5 != HA1("MD5", "1001", "branch.example.com", "demo1001") {
		t.Errorf("users[0] = %+v", in.Users[0])
	}
}

func TestSealPrehashed(t *testing.T) {
	// HQ may push HA1s instead of passwords.
	d := loadFile(t, "testdata/valid/sealed.json")
	want := mustJSON(t, d)
	if err := d.Seal(nil); err != nil {
		t.Fatal(err)
	}
	if got := mustJSON(t, d); got != want {
		t.Errorf("pre-hashed credentials changed:\n%s\n%s", got, want)
	}
}

// hq.client_key_pem is a secret like management.key_pem: redacted in
// printed documents, kept by Seal when given back redacted or empty.
func TestHQClientKeySecret(t *testing.T) {
	prev := sealed(t, loadFile(t, "testdata/valid/hq_tls.json"), nil)
	key := prev.HQ.ClientKeyPEM
	if key == "" {
		t.Fatal("test document has no hq.client_key_pem")
	}
	r := prev.Redact()
	if r.HQ.ClientKeyPEM != Redacted || strings.Contains(mustJSON(t, r), jsonEscaped(key)) {
		t.Fatalf("hq.client_key_pem not redacted: %q", r.HQ.ClientKeyPEM)
	}
	if r.HQ.ClientCertPEM != prev.HQ.ClientCertPEM || r.HQ.CAPEM != prev.HQ.CAPEM {
		t.Error("certificates are public and must stay")
	}
	for _, given := range []string{Redacted, ""} {
		in := viaJSON(t, r)
		in.HQ.ClientKeyPEM = given
		if err := in.Seal(prev); err != nil {
			t.Fatalf("Seal with %q: %v", given, err)
		}
		if in.HQ.ClientKeyPEM != key {
			t.Errorf("Seal with %q did not keep the stored key", given)
		}
	}
}
