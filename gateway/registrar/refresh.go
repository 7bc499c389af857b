package registrar

import "time"

// Refreshes that are not written (flash wear).
//
// A phone re-registers long before its binding expires: at half the
// interval, and behind a NAT often every 30 to 60 seconds to keep its
// pinhole open, with an interval of an hour. Writing each refresh through
// to SQLite would rewrite every binding's row once a minute, forever, on
// the box's flash (and cost 5 % of a registration's CPU under load:
// bench/RESULTS.md, issue 16 item 2), while a refresh changes only the
// binding's expiry, Call-ID and CSeq.
//
// Decision: a refresh that changes nothing else is written only when the
// expiry last written has fallen more than a quarter of the granted
// interval behind the new one. What a restart loses by that: a binding
// restored from the database may expire up to a quarter of its interval
// early; a phone that refreshed within that quarter (the only one whose
// refresh was not written) refreshes again well before. The Call-ID and
// CSeq restored are those of the last written refresh: they order
// requests within one Call-ID (RFC 3261 §10.3 step 7), which a restart's
// re-registration makes moot.

// quietRefresh reports whether nb, replacing old at now, is a refresh
// that need not be written: the same contact, from the same place, with
// the same attributes, and old's written expiry at least three quarters
// of nb's interval away.
func quietRefresh(old, nb *Binding, now time.Time) bool {
	if old.ContactURI != nb.ContactURI || old.Contact != nb.Contact || old.Source != nb.Source || old.Local != nb.Local ||
		old.Q != nb.Q || old.UserAgent != nb.UserAgent || old.Instance != nb.Instance || old.RegID != nb.RegID ||
		old.Outbound != nb.Outbound {
		return false
	}
	interval := nb.Expires.Sub(now)
	return old.saved.Sub(now) >= interval-interval/4
}
