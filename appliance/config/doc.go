// Package config is the document HQ pushes to each box (docs/design.md §3): its
// Go types, whole-document validation with JSON paths, the handling of
// secrets, and digest HA1 computation.
//
// # The document
//
// One JSON object with the sections schema, site, sip, users, hq, pstn,
// dialplan, inbound, wan, media, msr, media_resources, management and status;
// examples/branch.json is the normative example. Every field is optional in
// the sense that its zero value means "the default", and the Effective*
// methods (SIP.MinExpires, HQ.EffectiveHold, Media.EffectivePortMin, …) are
// the one place where defaults are applied. Default returns the embedded
// standalone document that outpostd runs with no configuration.
//
// Parse is strict: a syntax error (with line and column), a value of the wrong
// type, a field this package does not know (names are case-sensitive) or a
// field given twice is an error, and all of them are reported, not just the
// first. JSON null is accepted anywhere and means the default. Validate then
// checks the whole document against every rule and again reports every
// problem; Load does both.
//
// # Paths
//
// Each FieldError names the offending value by its path in the document:
// object fields joined by ".", array elements by [index], map entries by
// their quoted key — "users[3].extension", "sip.listen[0]",
// "dialplan[1].survivable.route", `media_resources.matrix["kazan"]["moscow"]`.
// The empty path is the document as a whole (e.g. a syntax error before the
// first field). A cross-field problem is reported at the field an
// administrator would change, usually the later of the two ("duplicate
// extension 1001 (also users[0])" is on users[3].extension).
//
// # Secrets
//
// User passwords are never stored: Seal replaces each one by HA1 values
// (H(extension:realm:password), for MD5 and SHA-256) computed with the
// effective realm (sip.realm, else site.domain). Redact produces the copy
// that is printed, logged or served by the API: user passwords and HA1s are
// gone, and hq.auth_password, msr.password, management.key_pem and
// sip.tls.key_pem read
// "<redacted>" (the Redacted constant).
//
// A document sent back with "<redacted>" in a secret keeps the stored value:
// Seal(running) copies it from the running document. So does an empty
// secret whose section is otherwise present (for users, any user whose
// password is empty). A user keeps its HA1s only while the realm is
// unchanged, since HA1s depend on it; after a realm change every password
// must be given again. Validate accepts "<redacted>" as a placeholder; Seal
// reports the placeholders it cannot resolve. The usual apply sequence is
// Parse (or Load), Seal(running), Validate, store.
//
// # Inbound rules
//
// An inbound rule turns a called DID into an extension with
// regexp.ReplaceAllString(did, to). Rules are tried in order; the first
// whose result is a known extension wins, and a rule whose result is not a
// known extension falls through to the next one. Validate runs every user's
// DID through the rules this way.
//
// The package is pure: it imports only the standard library, does no I/O and
// knows nothing of the parts' own Config types — the appliance translates.
package config
