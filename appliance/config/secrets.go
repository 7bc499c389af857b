package config

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Redacted stands for a secret in printed documents. Given back on input, it
// means "keep the stored value" (see Seal).
const Redacted = "<redacted>"

// HA1 returns the lowercase hex digest H(username:realm:password) used by
// HTTP/SIP digest authentication (RFC 7616 §3.4.2, RFC 3261 §22.4) for alg
// "MD5" or "SHA-256" (case-insensitive), or "" for any other algorithm.
func HA1(alg, username, realm, password string) string {
	in := []byte(username + ":" + realm + ":" + password)
	switch {
	case strings.EqualFold(alg, "MD5"):
		sum := md5.Sum(in)
		return hex.EncodeToString(sum[:])
	case strings.EqualFold(alg, "SHA-256"):
		sum := sha256.Sum256(in)
		return hex.EncodeToString(sum[:])
	}
	return ""
}

// Seal makes d fit for storage, given prev, the running document (nil when
// there is none). On error d is left unchanged and the error is Errors.
//
// Users: a clear-text Password is replaced by HA1MD5 and HA1SHA256 computed
// for the extension and the effective realm (sip.realm, else site.domain),
// and cleared. A Password that is "" or Redacted keeps what the same
// extension has in prev, provided the realm did not change (a clear-text
// password in prev is hashed afresh, whatever the realm); otherwise it is an
// error on users[i].password: "password required: new user" or "password
// required: realm changed". HA1 values given in d without a password are
// kept as they are (HQ may push pre-hashed credentials), except when they
// are prev's values and the realm changed: they would no longer verify.
//
// Other secrets (hq.auth_password, msr.password, management.key_pem,
// sip.tls.key_pem, capture.password, pool.secret) are
// stored as given, except that Redacted keeps prev's value (an error when
// prev has none), and so does "" when the rest of its section is set.
func (d *Document) Seal(prev *Document) error {
	n := d.Clone()
	var errs Errors
	realm := n.SIP.EffectiveRealm(n.Site)
	prevRealm := ""
	prevUsers := map[string]User{}
	if prev != nil {
		prevRealm = prev.SIP.EffectiveRealm(prev.Site)
		for _, u := range prev.Users {
			if _, dup := prevUsers[u.Extension]; !dup {
				prevUsers[u.Extension] = u
			}
		}
	}
	realmChanged := prev != nil && prevRealm != realm
	for i := range n.Users {
		u := &n.Users[i]
		path := field(index("users", i), "password")
		if u.HA1MD5 == Redacted {
			u.HA1MD5 = ""
		}
		if u.HA1SHA256 == Redacted {
			u.HA1SHA256 = ""
		}
		p, inPrev := prevUsers[u.Extension]
		switch {
		case u.Password != "" && u.Password != Redacted:
			u.setHA1(realm, u.Password)
		case u.HA1MD5 != "" || u.HA1SHA256 != "":
			if inPrev && realmChanged && u.HA1MD5 == p.HA1MD5 && u.HA1SHA256 == p.HA1SHA256 {
				errs.add(path, "password required: realm changed")
			}
		case !inPrev:
			errs.add(path, "password required: new user")
		case p.Password != "" && p.Password != Redacted:
			u.setHA1(realm, p.Password)
		case realmChanged:
			errs.add(path, "password required: realm changed")
		case p.HA1MD5 == "" && p.HA1SHA256 == "":
			errs.add(path, "password required: no stored credentials for %s", u.Extension)
		default:
			u.HA1MD5, u.HA1SHA256 = p.HA1MD5, p.HA1SHA256
		}
		u.Password = ""
	}

	var prevHQ, prevHQKey, prevMSR, prevMgmt, prevCapture, prevPool, prevTLS string
	if prev != nil {
		prevHQ, prevMSR, prevMgmt, prevCapture = prev.HQ.AuthPassword, prev.MSR.Password, prev.Management.KeyPEM, prev.Capture.Password
		prevTLS = prev.SIP.TLS.KeyPEM
		prevHQKey = prev.HQ.ClientKeyPEM
		if prev.Pool != nil {
			prevPool = prev.Pool.Secret
		}
	}
	hq := n.HQ
	hq.AuthPassword, hq.ClientKeyPEM = "", ""
	keepSecret(&errs, "hq.auth_password", &n.HQ.AuthPassword, prevHQ, !isEmpty(hq))
	keepSecret(&errs, "hq.client_key_pem", &n.HQ.ClientKeyPEM, prevHQKey, n.HQ.ClientCertPEM != "")
	msr := n.MSR
	msr.Password = ""
	keepSecret(&errs, "msr.password", &n.MSR.Password, prevMSR, !isEmpty(msr))
	mg := n.Management
	mg.KeyPEM = ""
	keepSecret(&errs, "management.key_pem", &n.Management.KeyPEM, prevMgmt, !isEmpty(mg))
	keepSecret(&errs, "sip.tls.key_pem", &n.SIP.TLS.KeyPEM, prevTLS, n.SIP.TLS.CertPEM != "")
	cp := n.Capture
	cp.Password = ""
	keepSecret(&errs, "capture.password", &n.Capture.Password, prevCapture, !isEmpty(cp))
	if n.Pool != nil {
		keepSecret(&errs, "pool.secret", &n.Pool.Secret, prevPool, true)
	}

	if len(errs) > 0 {
		return errs
	}
	*d = *n
	return nil
}

func (u *User) setHA1(realm, password string) {
	u.HA1MD5 = HA1("MD5", u.Extension, realm, password)
	u.HA1SHA256 = HA1("SHA-256", u.Extension, realm, password)
}

// keepSecret applies the "Redacted or empty keeps the stored value" rule to
// one secret; sectionSet tells whether the rest of its section is set.
func keepSecret(errs *Errors, path string, v *string, prev string, sectionSet bool) {
	switch {
	case *v == Redacted && prev == "":
		errs.add(path, "%s given but there is no stored value to keep", Redacted)
	case *v == Redacted, *v == "" && sectionSet:
		*v = prev
	}
}

// Redact returns a deep copy safe to print or send: users carry no password
// and no HA1 (Password is Redacted where a credential exists), and
// hq.auth_password, hq.client_key_pem, msr.password, management.key_pem, sip.tls.key_pem,
// capture.password and pool.secret are Redacted when
// set. Certificates are public and kept.
func (d *Document) Redact() *Document {
	r := d.Clone()
	if r == nil {
		return nil
	}
	for i := range r.Users {
		u := &r.Users[i]
		if u.Password != "" || u.HA1MD5 != "" || u.HA1SHA256 != "" {
			u.Password = Redacted
		}
		u.HA1MD5, u.HA1SHA256 = "", ""
	}
	redact(&r.HQ.AuthPassword)
	redact(&r.HQ.ClientKeyPEM)
	redact(&r.MSR.Password)
	redact(&r.Management.KeyPEM)
	redact(&r.SIP.TLS.KeyPEM)
	redact(&r.Capture.Password)
	if r.Pool != nil {
		redact(&r.Pool.Secret)
	}
	return r
}

func redact(s *string) {
	if *s != "" {
		*s = Redacted
	}
}
