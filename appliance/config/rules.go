package config

import (
	"math"
	"time"
)

//go:generate go run ./internal/docgen/cmd/docgen

// FieldRule is what the configuration reference (docs/config-reference.md)
// and the JSON Schema (docs/schema/outpost-config.schema.json) say about a
// field besides its JSON type and its doc comment; internal/docgen makes
// both from the document's Go types, their doc comments and FieldRules.
//
// A default is never written here as a number: Default calls the accessor
// the parts read, so the reference shows what the box applies. Bounds,
// enums and patterns are the ones Validate enforces (the package's tests
// try both sides of every bound); what only Validate can check, across
// fields, is in Checks.
type FieldRule struct {
	// Default returns the field's effective value, as JSON would write it,
	// from a document in which the field is absent (and every array on
	// its path has one element). Nil when DefaultText says it, or the zero
	// value (false, none) is the default.
	Default func(d *Document) any
	// DefaultText is a default that is not a constant ("site.domain").
	DefaultText string
	// Required: Validate refuses a document without the field.
	Required bool
	// Min and Max bound a number (inclusive); ZeroOK admits 0, the
	// default, outside them. ExclusiveMin makes Min exclusive.
	Min, Max     *float64
	ExclusiveMin bool
	ZeroOK       bool
	MultipleOf   int
	// Enum lists the accepted strings ("" only when listed).
	Enum []string
	// Bool: the field also takes true and false (an older form of it).
	Bool bool
	// Pattern is a regular expression in the common subset of RE2 and
	// ECMA-262 that every accepted string matches; PatternText says it in
	// words for the reference ("" = the expression itself).
	Pattern, PatternText string
	// MinLength and MaxLength bound a string (MaxLength counts bytes in
	// the box and characters in the schema: the schema is the looser).
	MinLength, MaxLength int
	MinItems             int
	// Items is the rule of an array's elements; Keys and Values those of a
	// map's keys and values.
	Items, Keys, Values *FieldRule
	// Unit of a number: "seconds", "milliseconds", ...
	Unit string
	// Secret fields are redacted when the document is printed or served.
	Secret bool
	// Example is a value for the reference and the schema's examples; nil
	// = the value in testdata/valid/full.json, else examples/branch.json.
	Example any
	// Checks are the rules Validate applies that a schema cannot express.
	Checks string
}

func num(f float64) *float64 { return &f }

// controls is the character class of hasControl.
const controls = "\x00-\x1f\x7f-\u009f"

// Patterns shared with Validate, written so that "" (the default) matches
// where the field is optional.
var (
	// noControl: text without C0/C1 control characters (hasControl).
	noControl    = "^[^" + controls + "]*$"
	optNumber    = "^$|" + numberRe.String()
	optName      = "^$|" + nameRe.String()
	optDialled   = "^$|" + dialledRe.String()
	optSRV       = "^$|" + srvServiceRe.String()
	headerPrefix = "^$|^[A-Za-z0-9.!%*_+`'~-]*-$"
	extensionRe  = `^[0-9A-Za-z_.+-]{1,32}$`
	// listenPrefix is the part of ParseListen's grammar a pattern states
	// exactly: the transport before the first ':'.
	listenPrefix = `^(udp|tcp|tls):`
)

// probeInterval is the range of every OPTIONS interval in milliseconds.
func probeInterval(def func(d *Document) any, text string) *FieldRule {
	return &FieldRule{Default: def, DefaultText: text, Min: num(100), Max: num(600000), ZeroOK: true, Unit: "milliseconds", Example: 5000}
}

func ms(d time.Duration) int { return int(d / time.Millisecond) }

// The rules of a route's failover limits (hq.failover, pstn.failover).
func attemptTimeout(def func(*Document) any) *FieldRule {
	return &FieldRule{Default: def, Min: num(100), Max: num(60000), ZeroOK: true, Unit: "milliseconds", Example: 2000}
}

func maxTargets() *FieldRule {
	return &FieldRule{DefaultText: "every target", Min: num(0), Unit: "targets", Example: 2}
}

func retry5xx() *FieldRule {
	return &FieldRule{Items: &FieldRule{Min: num(500), Max: num(599)}, Example: []any{500, 502},
		Checks: "5xx statuses other than 503 and 504 (those always move on); no duplicates."}
}
func sec(d time.Duration) int { return int(d / time.Second) }

var transportEnum = []string{"udp", "tcp", "tls", ""}

var srtpEnum = []string{SRTPOff, SRTPOffer, SRTPRequire}

var fieldRules = map[string]*FieldRule{
	"schema": {Required: true, Min: num(1), Max: num(1), Example: 1},

	"site":        {Required: true},
	"site.name":   {Required: true, Pattern: "^[^" + controls + "]*[^\\s" + controls + "][^" + controls + "]*$", PatternText: "not blank, no control characters", MaxLength: 128, Example: "kazan-branch"},
	"site.domain": {Example: "kazan.example.com", Checks: "An IP literal or a DNS name."},
	"site.zone":   {MaxLength: 64, Pattern: noControl, Example: "default"},
	"site.site":   {MaxLength: 64, Pattern: noControl, Example: "kazan", Checks: "Required when media_resources.matrix is set."},

	"sip": {Required: true},
	"sip.listen": {Required: true, MinItems: 1, Items: &FieldRule{Pattern: listenPrefix},
		Example: []any{"udp:0.0.0.0:5060", "tcp:[::]:5060", "tls:wan0:5061"},
		Checks:  "Each spec well-formed as described; no two specs may bind the same port, and no UDP port may be inside the media port range."},
	"sip.realm": {DefaultText: "`site.domain`", MaxLength: 128, Pattern: `^[^"\\` + controls + `]*$`,
		PatternText: `no '"', '\' or control characters`, Example: "kazan.example.com",
		Checks: "sip.realm or site.domain is required; a realm taken from site.domain follows the same rules."},
	"sip.min_expires": {Default: func(d *Document) any { return d.SIP.MinExpires() }, Min: num(0), Unit: "seconds", Example: 120,
		Checks: "At most sip.max_expires."},
	"sip.max_expires": {Default: func(d *Document) any { return d.SIP.MaxExpires() }, Min: num(0), Unit: "seconds", Example: 7200,
		Checks: "At least sip.min_expires."},
	"sip.digest": {Default: func(d *Document) any { return d.SIP.DigestAlgorithms() }, Items: &FieldRule{Enum: digestAlgs},
		Example: []any{"SHA-256"}, Checks: "No algorithm twice."},
	"sip.registrar": {},
	"sip.registrar.auth_fail_limit": {Default: func(d *Document) any { return d.SIP.Registrar.EffectiveAuthFailLimit() },
		Min: num(0), Unit: "failures per minute", Example: 5},
	"sip.registrar.storm_rate": {Default: func(d *Document) any { return d.SIP.Registrar.EffectiveStormRate() },
		Min: num(-1), Unit: "registrations per second", Example: 500},
	"sip.registrar.challenge_rate": {Default: func(d *Document) any { return d.SIP.Registrar.EffectiveChallengeRate() },
		Min: num(-1), Unit: "refusals per second", Example: 50},
	"sip.registrar.retry_after_s": {Default: func(d *Document) any { return sec(d.SIP.Registrar.EffectiveRetryAfter()) },
		Min: num(0), Max: num(3600), Unit: "seconds", Example: 30},
	"sip.registrar.persist_interval_ms": {Default: func(d *Document) any { return ms(d.SIP.Registrar.EffectivePersistInterval()) },
		Min: num(0), Max: num(60000), Unit: "milliseconds", Example: 5000},
	"sip.registrar.allow_rfc2069": {Example: true},
	"sip.drain_s": {Default: func(d *Document) any { return sec(d.SIP.EffectiveDrain()) }, Min: num(0), Max: num(3600),
		Unit: "seconds", Example: 300},
	"sip.survivable_warning": {DefaultText: `"Survivable mode: limited service"`, MaxLength: 200, Pattern: noControl,
		Example: "Branch on backup: limited service"},
	"sip.survivable_warning_off": {Example: true},
	"sip.tls":                    {},
	"sip.tls.cert_pem":           {DefaultText: "the box's self-signed certificate", Example: pemExample("CERTIFICATE"), Checks: "PEM certificates, leaf first; with sip.tls.key_pem, whose key it must be."},
	"sip.tls.key_pem":            {Secret: true, Example: pemExample("PRIVATE KEY"), Checks: "Required with sip.tls.cert_pem."},

	"users":           {},
	"users.extension": {Required: true, Pattern: extensionRe, Example: "1001", Checks: "Unique; not an emergency number."},
	"users.password": {Secret: true, MaxLength: 256, Example: "change-me-1001",
		Checks: "Required unless the user carries ha1_md5/ha1_sha256 for every sip.digest algorithm; not equal to the extension."},
	"users.name": {MaxLength: 128, Pattern: noControl, Example: "Alice Petrova"},
	"users.did":  {Pattern: optNumber, Example: "+78435550101", Checks: "Unique; the inbound rules must route it to this user."},
	"users.voicemail": {Enum: []string{"", "none", "hq", "local", "fallback"}, Bool: true, Example: "fallback",
		Checks: "hq needs hq.voicemail_pilot; fallback without one is local."},
	"users.admin":                {Example: true},
	"users.ha1_md5":              {Pattern: "^$|^[0-9a-f]{32}$", Example: "0123456789abcdef0123456789abcdef"},
	"users.media_zone":           {MaxLength: 64, Pattern: noControl, Example: "default"},
	"users.media_site":           {MaxLength: 64, Pattern: noControl, Example: "kazan", Checks: "A row of media_resources.matrix when that is set."},
	"pickup_groups":              {},
	"pickup_groups.name":         {MaxLength: 64, Pattern: noControl, Example: "reception"},
	"pickup_groups.members":      {Required: true, MinItems: 2, Items: &FieldRule{Pattern: extensionRe}, Example: []string{"1001", "1002"}, Checks: "Users' extensions, each once."},
	"voicemail":                  {},
	"voicemail.max_message_s":    {Min: num(10), Max: num(3600), ZeroOK: true, Unit: "seconds", Default: func(d *Document) any { return d.Voicemail.EffectiveMaxMessageS() }, Example: 120},
	"voicemail.silence_s":        {Min: num(-1), Max: num(120), Unit: "seconds", Default: func(d *Document) any { return d.Voicemail.EffectiveSilenceS() }, Example: 8},
	"voicemail.no_media_s":       {Min: num(2), Max: num(120), ZeroOK: true, Unit: "seconds", Default: func(d *Document) any { return d.Voicemail.EffectiveNoMediaS() }, Example: 15},
	"voicemail.mailbox_messages": {Min: num(1), Max: num(10000), ZeroOK: true, Unit: "messages", Default: func(d *Document) any { return d.Voicemail.EffectiveMailboxMessages() }, Example: 50},
	"voicemail.total_mb":         {Min: num(1), Max: num(65536), ZeroOK: true, Unit: "MiB", Default: func(d *Document) any { return d.Voicemail.EffectiveTotalMB() }, Example: 128},
	"park":                       {},
	"park.first":                 {Required: true, Pattern: "^[0-9]{1,8}$", Example: "701"},
	"park.last":                  {Required: true, Pattern: "^[0-9]{1,8}$", Example: "709", Checks: "As many digits as park.first, at most 100 orbits; no orbit a user's or a group's extension or an emergency number."},
	"park.timeout_s":             {Min: num(10), Max: num(3600), ZeroOK: true, Unit: "seconds", Default: func(d *Document) any { return d.Park.EffectiveTimeoutS() }, Example: 90},
	"park.overflow":              {Pattern: "^$|" + dialledRe.String(), PatternText: "a number as for users[].forward.always", Example: "1000", Checks: "Not an orbit."},
	"groups":                     {},
	"groups.extension":           {Required: true, Pattern: extensionRe, Example: "1900", Checks: "Unique among users and groups; not an emergency number."},
	"groups.name":                {MaxLength: 128, Pattern: noControl, Example: "Sales"},
	"groups.members": {Required: true, MinItems: 1, Items: &FieldRule{Pattern: extensionRe}, Example: []string{"1001", "1002"},
		Checks: "Each a user's extension, at most once."},
	"groups.strategy": {Enum: []string{"", "simultaneous", "sequential", "round_robin", "longest_idle"},
		Default: func(d *Document) any { return d.Groups[0].EffectiveStrategy() }, Example: "sequential"},
	"groups.ring_s":  {Min: num(5), Max: num(300), ZeroOK: true, Unit: "seconds", Default: func(d *Document) any { return d.Groups[0].EffectiveRingS() }, Example: 10},
	"groups.total_s": {Min: num(5), Max: num(3600), ZeroOK: true, Unit: "seconds", Example: 60},
	"groups.queue_s": {Min: num(10), Max: num(3600), ZeroOK: true, Unit: "seconds", Example: 300},
	"groups.overflow": {Pattern: "^$|^voicemail$|" + dialledRe.String(), PatternText: `"voicemail", or a number as for users[].forward.always`,
		Example: "voicemail", Checks: "Not the group itself; overflows between groups must not loop; voicemail needs hq.voicemail_pilot."},
	"users.delegates": {},
	"users.delegates.users": {Required: true, MinItems: 1, Items: &FieldRule{Pattern: extensionRe}, Example: []string{"1002"},
		Checks: "Other users' extensions, each once."},
	"users.delegates.after_s": {Min: num(0), Max: num(120), Unit: "seconds", Example: 10},
	"users.delegates.identity": {Enum: []string{"", "from", "pai"}, Default: func(d *Document) any { return d.Users[0].Delegates.EffectiveIdentity() },
		Example: "pai"},
	"users.dnd":     {Example: false},
	"users.forward": {},
	"users.forward.always": {Pattern: optDialled, PatternText: "digits, *, # and a leading +, at most 32", Example: "+78435550199",
		Checks: "Not the user's own extension; forward.always must not lead back to the user through other users' forward.always."},
	"users.forward.busy":        {Pattern: optDialled, PatternText: "as forward.always", Example: "1002", Checks: "Not the user's own extension."},
	"users.forward.no_answer":   {Pattern: optDialled, PatternText: "as forward.always", Example: "1002", Checks: "Not the user's own extension."},
	"users.forward.no_answer_s": {Min: num(5), Max: num(300), ZeroOK: true, Unit: "seconds", Example: 15},
	"users.ha1_sha256":          {Pattern: "^$|^[0-9a-f]{64}$", Example: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},

	"hq":            {},
	"hq.media_zone": {MaxLength: 64, Pattern: noControl, Example: "default"},
	"hq.media_site": {MaxLength: 64, Pattern: noControl, Example: "moscow", Checks: "A row of media_resources.matrix when that is set."},
	"hq.domain":     {Example: "hq.example.com", Checks: "An IP literal or a DNS name."},
	"hq.targets":    {Items: &FieldRule{MinLength: 1}, Example: []any{"tls:hq1.example.com:5061", "198.18.1.10"}, Checks: "Each a siptarget ([transport:]host[:port]); no duplicates."},
	"hq.transport":  {Default: func(d *Document) any { return d.HQ.EffectiveTransport() }, Enum: transportEnum, Example: "tls"},
	"hq.srv_service": {DefaultText: "by transport", Pattern: optSRV, Example: "_sipinternaltls._tcp",
		Checks: "Requires hq.domain."},
	"hq.ca_pem":          {DefaultText: "the system roots", Example: pemExample("CERTIFICATE")},
	"hq.client_cert_pem": {Example: pemExample("CERTIFICATE"), Checks: "With hq.client_key_pem, whose key it must be."},
	"hq.client_key_pem":  {Secret: true, Example: pemExample("PRIVATE KEY"), Checks: "With hq.client_cert_pem."},
	"hq.dns_servers": {DefaultText: "the system resolver", Items: &FieldRule{MinLength: 1}, Example: []any{"198.18.1.2:53"},
		Checks: "Each IP:port; no duplicates."},
	"hq.options_interval_ms":         probeInterval(func(d *Document) any { return ms(d.HQ.EffectiveOptionsInterval()) }, ""),
	"hq.down_after":                  {Default: func(d *Document) any { return d.HQ.EffectiveDownAfter() }, Min: num(0), Unit: "probes", Example: 1},
	"hq.up_after":                    {Default: func(d *Document) any { return d.HQ.EffectiveUpAfter() }, Min: num(0), Unit: "probes", Example: 5},
	"hq.hold_s":                      {Default: func(d *Document) any { return sec(d.HQ.EffectiveHold()) }, Min: num(0), Unit: "seconds", Example: 60},
	"hq.failover":                    {},
	"hq.failover.attempt_timeout_ms": attemptTimeout(func(d *Document) any { return ms(d.HQ.Failover.EffectiveAttemptTimeout()) }),
	"hq.failover.max_targets":        maxTargets(),
	"hq.failover.retry_5xx":          retry5xx(),
	"hq.register_upstream":           {Example: true, Checks: "Requires hq.domain or hq.targets."},
	"hq.auth_username":               {MaxLength: 128, Pattern: noControl, Example: "kazan-sba", Checks: "Required when hq.auth_password is set."},
	"hq.auth_password":               {Secret: true, Example: "change-me-trunk"},
	"hq.voicemail_pilot":             {Pattern: optNumber, Example: "+74955550199"},
	"hq.pstn_prefix":                 {Pattern: prefixRe.String(), Example: "+7495555"},
	"hq.call_fallback":               {Default: func(d *Document) any { return d.HQ.EffectiveCallFallback() }, Example: false},
	"hq.backup":                      {Checks: "Requires hq.domain or hq.targets, and a domain or targets of its own."},
	"hq.backup.domain":               {Example: "hq-dr.example.com"},
	"hq.backup.targets":              {Items: &FieldRule{MinLength: 1}, Example: []any{"tcp:198.18.2.10:5060"}, Checks: "Each a siptarget; no duplicates."},
	"hq.backup.transport":            {Default: func(d *Document) any { return d.HQ.Backup.EffectiveTransport() }, Enum: transportEnum, Example: "tcp"},
	"hq.backup.failover":             {DefaultText: "hq.failover"},
	"hq.backup.failover.attempt_timeout_ms": attemptTimeout(func(d *Document) any {
		if d.HQ.Backup == nil || d.HQ.Backup.Failover == nil {
			return ms(d.HQ.Failover.EffectiveAttemptTimeout())
		}
		return ms(d.HQ.Backup.Failover.EffectiveAttemptTimeout())
	}),
	"hq.backup.failover.max_targets": maxTargets(),
	"hq.backup.failover.retry_5xx":   retry5xx(),
	"hq.backup.srv_service":          {DefaultText: "by transport", Pattern: optSRV, Example: "_sip._tcp", Checks: "Requires hq.backup.domain."},
	"hq.trusted_networks": {Items: &FieldRule{MinLength: 1}, Example: []any{"198.18.8.0/24", "2001:db8:8::/48"},
		Checks: "Each a CIDR without host bits, not /0, not IPv4-mapped; no duplicates; requires hq.domain or hq.targets."},

	"pstn":                             {},
	"pstn.gateways":                    {},
	"pstn.gateways.name":               {Required: true, Pattern: nameRe.String(), Example: "fxo-1", Checks: "Unique."},
	"pstn.gateways.target":             {Required: true, MinLength: 1, Example: "198.18.3.2:5060", Checks: "A siptarget ([transport:]host[:port])."},
	"pstn.gateways.media_zone":         {MaxLength: 64, Pattern: noControl, Example: "default"},
	"pstn.gateways.media_site":         {MaxLength: 64, Pattern: noControl, Example: "kazan", Checks: "A row of media_resources.matrix when that is set."},
	"pstn.gateways.transport":          {Default: func(d *Document) any { return d.PSTN.Gateways[0].EffectiveTransport() }, Enum: transportEnum, Example: "tls"},
	"pstn.emergency":                   {Items: &FieldRule{Pattern: emergencyRe.String()}, Example: []any{"112", "911"}, Checks: "No duplicates."},
	"pstn.options_interval_ms":         probeInterval(func(d *Document) any { return ms(d.PSTN.OptionsInterval()) }, "no probes"),
	"pstn.failover":                    {},
	"pstn.failover.attempt_timeout_ms": attemptTimeout(func(d *Document) any { return ms(d.PSTN.Failover.EffectiveAttemptTimeout()) }),
	"pstn.failover.max_targets":        maxTargets(),
	"pstn.failover.retry_5xx":          retry5xx(),

	"dialplan":                    {},
	"dialplan.name":               {MaxLength: 64, Pattern: noControl, Example: "intl", Checks: "Unique."},
	"dialplan.match":              {Required: true, MinLength: 1, Example: `^011(\d+)$`, Checks: "A Go regular expression (RE2 syntax)."},
	"dialplan.route":              {Required: true, Enum: routes, Example: "pstn", Checks: "pstn needs a pstn gateway."},
	"dialplan.strip":              {Min: num(0), Unit: "characters", Example: 3},
	"dialplan.prepend":            {Pattern: prependRe.String(), Example: "+"},
	"dialplan.survivable":         {},
	"dialplan.survivable.route":   {Required: true, Enum: routes, Example: "pstn", Checks: "pstn needs a pstn gateway."},
	"dialplan.survivable.strip":   {Min: num(0), Unit: "characters", Example: 1},
	"dialplan.survivable.prepend": {Pattern: prependRe.String(), Example: "+7495555"},

	"inbound":       {},
	"inbound.match": {Required: true, MinLength: 1, Example: `^\+7843555(01\d{2})$`, Checks: "A Go regular expression."},
	"inbound.to": {Required: true, MinLength: 1, Example: "10$1",
		Checks: "A known extension, or a template whose $n and ${name} name groups of match."},

	"wan":           {},
	"wan.interface": {Example: "wan0", Checks: "A Linux interface name (at most 15 bytes)."},

	"media":       {},
	"media.relay": {Example: true},
	"media.port_min": {Default: func(d *Document) any { return d.Media.EffectivePortMin() }, Min: num(1024), Max: num(65535), ZeroOK: true,
		MultipleOf: 2, Example: 40000, Checks: "Less than media.port_max."},
	"media.port_max": {Default: func(d *Document) any { return d.Media.EffectivePortMax() }, Min: num(1024), Max: num(65535), ZeroOK: true,
		Example: 40999, Checks: "Greater than media.port_min."},
	"media.interfaces": {Items: &FieldRule{MinLength: 1, MaxLength: 15}, Example: []any{"lan0", "wan0"}, Checks: "Linux interface names; no duplicates."},
	"media.codecs": {Default: func(d *Document) any { return d.Media.EffectiveCodecs() }, Items: &FieldRule{Enum: codecs},
		Example: []any{"G722", "PCMA", "telephone-event"}, Checks: "No duplicates; at least one audio codec."},
	"media.inactivity_s": {Default: func(d *Document) any { return sec(d.Media.EffectiveInactivity()) }, Min: num(2), Max: num(3600),
		ZeroOK: true, Unit: "seconds", Example: 60},
	"media.music_on_hold": {MaxLength: maxMusicOnHold, Example: "off",
		Checks: "Base64 of a WAV file: 8 kHz mono, 16-bit PCM, A-law or µ-law, 20 ms to 60 s (the box reads it when the document is applied)."},
	"media.srtp": {Default: func(d *Document) any { return d.Media.EffectiveSRTP() }, Enum: append([]string{""}, srtpEnum...), Example: "offer"},
	"media.srtp_routes": {DefaultText: "`media.srtp`", Keys: &FieldRule{Enum: routes}, Values: &FieldRule{Enum: srtpEnum},
		Example: map[string]any{"hq": "require"}},
	"media.srtp_interfaces": {DefaultText: "`media.srtp`", Keys: &FieldRule{MinLength: 1, MaxLength: 15}, Values: &FieldRule{Enum: srtpEnum},
		Example: map[string]any{"lan0": "offer", "wan0": "require"}},

	"msr":                   {},
	"msr.enabled":           {Example: true, Checks: "Requires msr.servers and a service interface (msr.service_interface or wan.interface)."},
	"msr.name":              {DefaultText: "the box's host name", Pattern: optName, Example: "msr-kazan"},
	"msr.servers":           {Items: &FieldRule{MinLength: 1}, Example: []any{"ecss1.example.com:5060"}, Checks: "Each a siptarget; no duplicates."},
	"msr.service_interface": {DefaultText: "`wan.interface`", MaxLength: 15, Example: "wan0"},
	"msr.interfaces": {Default: func(d *Document) any { return d.MSR.EffectiveInterfaces() }, Items: &FieldRule{MinLength: 1},
		Example: []any{"lan*", "eth0.[0-9]*"}, Checks: "Each a glob (path.Match); no duplicates."},
	"msr.username": {Default: func(d *Document) any { return d.MSR.EffectiveUsername() }, Pattern: "^[^:" + controls + "]*$", PatternText: "no ':' or control characters", Example: "msr-kazan"},
	"msr.password": {Default: func(d *Document) any { return d.MSR.EffectivePassword() }, Secret: true, Example: "msr-secret"},
	"msr.register_interval_s": {Default: func(d *Document) any { return sec(d.MSR.EffectiveRegisterInterval()) }, Min: num(0),
		Unit: "seconds", Example: 60},
	"msr.retry_interval_s": {Default: func(d *Document) any { return sec(d.MSR.EffectiveRetryInterval()) }, Min: num(0),
		Unit: "seconds", Example: 120},
	"msr.control_port": {Default: func(d *Document) any { return d.MSR.EffectiveControlPort() }, Min: num(0), Max: num(65535),
		Example: 5701, Checks: "Not a port of sip.listen (TCP) or management.listen."},
	"msr.header_prefix": {Default: func(d *Document) any { return d.MSR.EffectiveHeaderPrefix() }, Pattern: headerPrefix, Example: "X-MSR-"},
	"msr.contact_id":    {Default: func(d *Document) any { return d.MSR.EffectiveContactID() }, Pattern: optName, Example: "2"},
	"msr.capacity_pps": {Default: func(d *Document) any { return d.MSR.EffectiveCapacityPPS() }, Min: num(0), Unit: "packets per second",
		Example: 100000},
	"msr.control_allow": {Items: &FieldRule{MinLength: 1}, Example: []any{"198.51.100.0/24"}, Checks: "Each a CIDR without host bits."},

	"media_resources": {},
	"media_resources.matrix": {Keys: &FieldRule{MinLength: 1}, Values: &FieldRule{Keys: &FieldRule{MinLength: 1}, Values: &FieldRule{Min: num(0)}},
		Example: map[string]any{"kazan": map[string]any{"kazan": 0, "moscow": 10}},
		Checks:  "When set, site.site is required and needs a row; a site's distance to itself is 0 unless the matrix says otherwise."},
	"media_resources.performance": {Keys: &FieldRule{MinLength: 1},
		Values:  &FieldRule{Default: func(d *Document) any { return d.MediaResources.EffectivePerformance("") }, Min: num(0), ExclusiveMin: true},
		Example: map[string]any{"msr-kazan": 0.5}},
	"media_resources.inactive": {Items: &FieldRule{MinLength: 1, MaxLength: 64, Pattern: noControl}, Example: []any{"msr-kazan"},
		Checks: "No duplicates."},
	"media_resources.placement":      {},
	"media_resources.placement.msr":  {Required: true, MinLength: 1, MaxLength: 64, Pattern: noControl, Example: "msr-kazan", Checks: "Unique."},
	"media_resources.placement.zone": {MaxLength: 64, Pattern: noControl, Example: "default", Checks: "zone or site (or both) is set."},
	"media_resources.placement.site": {MaxLength: 64, Pattern: noControl, Example: "kazan",
		Checks: "When media_resources.matrix is set, a site with a row in it."},

	"management":                 {},
	"management.listen":          {DefaultText: "no remote API", Example: "198.18.0.1:8443", Checks: "IP:port or :port (port 0 = any free port); not a TCP port of sip.listen."},
	"management.cert_pem":        {Example: pemExample("CERTIFICATE"), Checks: "With management.key_pem, whose key it must be."},
	"management.key_pem":         {Secret: true, Example: pemExample("PRIVATE KEY"), Checks: "With management.cert_pem."},
	"management.client_ca_pem":   {Example: pemExample("CERTIFICATE"), Checks: "Requires management.cert_pem."},
	"management.allowed_clients": {DefaultText: "every certificate the CA signed", Items: &FieldRule{MinLength: 1, MaxLength: maxClientEntry, Pattern: noControl}, Example: []any{"hq-noc.example.com"}, Checks: "Requires management.client_ca_pem; no duplicates."},
	"management.revoked_serials": {Items: &FieldRule{MinLength: 1, MaxLength: maxClientEntry, Pattern: noControl}, Example: []any{"0A:1B:2C"}, Checks: "Requires management.client_ca_pem; no duplicates once normalised."},

	"status":        {},
	"status.listen": {DefaultText: "no status page", Example: "198.18.0.1:8080", Checks: "IP:port or :port (port 0 = any free port); some user must have admin set."},

	"capture":            {},
	"capture.hep_server": {Pattern: "^$|^(udp|tcp):", Example: "udp:198.18.9.9:9060", Checks: "Required when capture.node_id or capture.password is set."},
	"capture.node_id":    {Min: num(0), Max: num(math.MaxUint32), Example: 2001},
	"capture.password":   {Secret: true, Example: "hep-secret"},

	"pool":              {},
	"pool.self":         {Required: true, MinLength: 1, Example: "box-a", Checks: "The name of one of pool.members."},
	"pool.members":      {Required: true, MinItems: 2},
	"pool.members.name": {Required: true, Pattern: nameRe.String(), Example: "box-a", Checks: "Unique."},
	"pool.members.target": {Required: true, MinLength: 1, Example: "udp:198.18.0.11:5060",
		Checks: "A siptarget with an IP address, udp or tcp; unique."},
	"pool.options_interval_ms": probeInterval(func(d *Document) any { return ms(d.Pool.EffectiveOptionsInterval()) }, ""),
	"pool.down_after":          {Default: func(d *Document) any { return d.Pool.EffectiveDownAfter() }, Min: num(0), Unit: "probes", Example: 2},
	"pool.up_after":            {Default: func(d *Document) any { return d.Pool.EffectiveUpAfter() }, Min: num(0), Unit: "probes", Example: 2},
	"pool.hold_s":              {Default: func(d *Document) any { return sec(d.Pool.EffectiveHold()) }, Min: num(0), Unit: "seconds", Example: 30},
	"pool.secret": {Required: true, Secret: true, MaxLength: 256, Example: "a-long-shared-pool-secret",
		Checks: "At least 16 bytes (or " + Redacted + ")."},
}

func pemExample(kind string) string {
	return "-----BEGIN " + kind + "-----\n...\n-----END " + kind + "-----\n"
}

func init() {
	var describe func(r *FieldRule)
	describe = func(r *FieldRule) {
		if r == nil {
			return
		}
		if r.Pattern == noControl && r.PatternText == "" {
			r.PatternText = "no control characters"
		}
		describe(r.Items)
		describe(r.Keys)
		describe(r.Values)
	}
	for _, r := range fieldRules {
		describe(r)
	}
}

// FieldRules returns the rule of every field by JSON path, array elements
// written without brackets ("users.extension"). The rules are shared:
// callers must not modify them.
func FieldRules() map[string]*FieldRule { return fieldRules }
