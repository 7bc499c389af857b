package config

import (
	"cmp"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"time"
)

// Document is the whole configuration of one box, as HQ pushes it. The zero
// value of every field means "the default"; the Effective* methods apply
// the defaults (docs/config-reference.md lists every field).
type Document struct {
	// Schema is the document schema version; only 1 exists.
	Schema int  `json:"schema"`
	Site   Site `json:"site"`
	SIP    SIP  `json:"sip"`
	// Users are the local SIP accounts.
	Users []User `json:"users,omitempty"`
	// Groups are the hunt (response) groups: extensions that ring their
	// members.
	Groups []Group `json:"groups,omitempty"`
	// PickupGroups are users who answer each other's ringing calls from
	// their own phones with *8 (any user can take a given user's ringing
	// call with ** and the extension).
	PickupGroups []PickupGroup `json:"pickup_groups,omitempty"`
	// Park is call park: absent, *85 and the orbits are not served.
	Park *Park `json:"park,omitempty"`
	// Voicemail bounds the messages the box records (users[].voicemail
	// local or fallback).
	Voicemail Voicemail `json:"voicemail,omitzero"`
	HQ        HQ        `json:"hq,omitzero"`
	PSTN      PSTN      `json:"pstn,omitzero"`
	// Dialplan is the outbound dial plan: rules tried in order on the
	// dialled number, the first that matches routes the call.
	Dialplan []Rule `json:"dialplan,omitempty"`
	// Inbound are the rules that turn a DID called from the PSTN into an
	// extension: tried in order, the first whose result is a known
	// extension wins, and a rule whose result is not one falls through.
	Inbound        []InboundRule  `json:"inbound,omitempty"`
	WAN            WAN            `json:"wan,omitzero"`
	Media          Media          `json:"media,omitzero"`
	MSR            MSR            `json:"msr,omitzero"`
	MediaResources MediaResources `json:"media_resources,omitzero"`
	Management     Management     `json:"management,omitzero"`
	Status         Status         `json:"status,omitzero"`
	Capture        Capture        `json:"capture,omitzero"`
	// Pool, when set, makes this box one member of a registrar pool;
	// absent = one box.
	Pool *Pool `json:"pool,omitempty"`
}

// Site names this branch.
type Site struct {
	Name   string `json:"name"`             // human name of the branch; the warn-agent of the survivable Warning
	Domain string `json:"domain,omitempty"` // SIP domain of the branch; the default digest realm
	Zone   string `json:"zone,omitempty"`   // media zone, for the choice of media resources
	Site   string `json:"site,omitempty"`   // media site: this box's row and column of media_resources.matrix
}

// SIP is the local SIP service: listeners, digest realm, registration limits.
type SIP struct {
	// Listen holds the listeners as "TRANSPORT:HOST[:PORT]": transport
	// udp, tcp or tls; HOST an IP literal (IPv6 in brackets), an interface
	// name, or "*" for every interface but loopback (the box follows the
	// interface's addresses as they come and go); PORT 0 (ephemeral) to
	// 65535, 5060 when omitted (5061 for tls).
	Listen []string `json:"listen"`
	// Realm is the digest realm of the local users; empty = site.domain.
	Realm string `json:"realm,omitempty"`
	// MinExpiresS is the shortest registration expiry the registrar
	// accepts (423 Interval Too Brief below it), in seconds.
	MinExpiresS int `json:"min_expires,omitempty"`
	// MaxExpiresS is the longest registration expiry the registrar
	// grants, in seconds; a longer request is shortened to it.
	MaxExpiresS int `json:"max_expires,omitempty"`
	// Digest lists the digest challenge algorithms, in the order of the
	// WWW-Authenticate (and Proxy-Authenticate) headers ("MD5",
	// "SHA-256"). The default is MD5 alone: some clients (libre before
	// 2.x, so Debian 12's baresip) give up at the first algorithm they do
	// not know instead of answering one they do, and never register when
	// SHA-256 is offered at all. A site whose phones all speak RFC 8760
	// lists "SHA-256" (first, to be preferred).
	Digest    []string  `json:"digest,omitempty"`
	Registrar Registrar `json:"registrar,omitzero"`
	// DrainS is how long a stopping box (SIGTERM, firmware update,
	// outpostctl drain) lets calls in progress finish while it refuses new
	// ones, in seconds.
	DrainS int `json:"drain_s,omitempty"`
	// SurvivableWarning is the text of the Warning (RFC 3261 §20.43, code
	// 399, warn-agent = site.name) the box adds to its answers to REGISTER
	// and INVITE while in survivable mode.
	SurvivableWarning string `json:"survivable_warning,omitempty"`
	// SurvivableWarningOff drops the survivable Warning header altogether,
	// and a pool member's Warning to the phones it serves as backup.
	SurvivableWarningOff bool `json:"survivable_warning_off,omitempty"`
	// TLS is the certificate the tls: listeners present to phones.
	TLS SIPTLS `json:"tls,omitzero"`
}

// SIPTLS is the certificate and private key of the tls: listeners. Both
// empty = the box's own self-signed certificate, made at first boot and
// kept in the data directory (outpostctl status shows its fingerprint for
// the phones to pin).
type SIPTLS struct {
	// CertPEM is the certificate chain of the tls: listeners in PEM, leaf
	// first.
	CertPEM string `json:"cert_pem,omitempty"`
	// KeyPEM is the private key of CertPEM in PEM.
	KeyPEM string `json:"key_pem,omitempty"`
}

// Registrar tunes the local registrar's protections.
type Registrar struct {
	// AuthFailLimit is the number of failed authentications per source and
	// user per minute before that pair's failures are slowed down.
	AuthFailLimit int `json:"auth_fail_limit,omitempty"`
	// StormRate is the number of new registrations admitted per second
	// before the registrar answers 503; -1 = no limit.
	StormRate int `json:"storm_rate,omitempty"`
	// ChallengeRate bounds the stateless refusals (407/403/400 to INVITEs
	// without valid credentials) sent to one source IP per second, burst
	// twice that; -1 = no limit.
	ChallengeRate int `json:"challenge_rate,omitempty"`
	// RetryAfterS is the Retry-After of the storm guard's 503, in seconds.
	RetryAfterS int `json:"retry_after_s,omitempty"`
	// PersistIntervalMS is how often changed bindings are written to the
	// store, in milliseconds.
	PersistIntervalMS int `json:"persist_interval_ms,omitempty"`
	// AllowRFC2069 accepts digest responses without qop (RFC 2069: no
	// nonce count, replayable while the nonce lives); false = qop=auth is
	// required.
	AllowRFC2069 bool `json:"allow_rfc2069,omitempty"`
}

// User is one local account. On the wire HQ sends Password; the box stores
// only the digest HA1 values (see Document.Seal).
type User struct {
	// Extension is the user's number and digest user name.
	Extension string `json:"extension"`
	// Password is the SIP digest password in clear text. The box stores
	// only its HA1 values; sent back empty or redacted it keeps them,
	// unless the realm changed.
	Password string `json:"password,omitempty"`
	// Name is the display name.
	Name string `json:"name,omitempty"`
	// DID is the user's E.164 number: calls from the PSTN to it reach the
	// user (through the inbound rules).
	DID string `json:"did,omitempty"`
	// Voicemail is where the user's calls go when they are not answered
	// within a ring time, or the user is busy or unreachable: "hq" to
	// hq.voicemail_pilot; "local" to the box, which records a message;
	// "fallback" to the pilot in normal mode and to the box otherwise
	// (survivable, standalone, no pilot) or when the call to the pilot
	// fails; "none" or empty: no voicemail. true means fallback and false
	// none (the form before the kinds).
	Voicemail VoicemailKind `json:"voicemail,omitempty"`
	// Admin lets the user open the local status page (HTTP Basic with the
	// extension and the SIP password).
	Admin bool `json:"admin,omitempty"`
	// HA1MD5 is lowercase hex of MD5(extension:realm:password), for a
	// user given without a password (pre-hashed by HQ, or sealed).
	HA1MD5 string `json:"ha1_md5,omitempty"`
	// HA1SHA256 is lowercase hex of SHA-256(extension:realm:password), as
	// ha1_md5.
	HA1SHA256 string `json:"ha1_sha256,omitempty"`
	// MediaZone is the media zone of the user's calls' leg, in place of
	// site.zone; empty = site.zone.
	MediaZone string `json:"media_zone,omitempty"`
	// MediaSite is the media site of the user's leg (its row of
	// media_resources.matrix), in place of site.site; empty = site.site.
	MediaSite string `json:"media_site,omitempty"`
	// DND (do not disturb) refuses the user's calls as busy without
	// ringing: they go to forward.busy, else voicemail, else get 486. The
	// phone sets it with *78 and clears it with *79.
	DND bool `json:"dnd,omitempty"`
	// Forward is the user's call forwarding. Phones change it with feature
	// codes (docs/features.md); what a phone set stands until it is
	// changed again, or until a push changes that field of this user.
	Forward *Forward `json:"forward,omitempty"`
	// Delegates makes the user a boss: calls to the user also ring the
	// delegates, and a delegate calls as the boss by dialling *33 before
	// the number.
	Delegates *Delegates `json:"delegates,omitempty"`
}

// Delegates are a boss's delegates (assistants).
type Delegates struct {
	// Users are the delegates' extensions. A delegate of several bosses
	// calls with *33 as the first of them in the document's order.
	Users []string `json:"users"`
	// AfterS delays the delegates' ringing after the boss's; 0 = at once.
	// They ring at once anyway when the boss's phones cannot: none
	// registered, all refused, or do-not-disturb.
	AfterS int `json:"after_s,omitempty"`
	// Identity is how a delegate's call on the boss's behalf shows the
	// boss: from (From and P-Asserted-Identity) or pai
	// (P-Asserted-Identity only, From stays the delegate's).
	Identity string `json:"identity,omitempty"`
}

// EffectiveIdentity is the identity mode in force.
func (d Delegates) EffectiveIdentity() string {
	if d.Identity == "" {
		return "from"
	}
	return d.Identity
}

// Group is a hunt group: calls to its extension ring its members by its
// strategy, each member at most once per call, skipping members who are
// in a call, in do-not-disturb or not registered; after total_s, or once
// every member was tried, the call goes to the overflow. Group calls do
// not follow the members' own forwards.
type Group struct {
	// Extension is the group's number: not a user's, and routed local by
	// the dial plan.
	Extension string `json:"extension"`
	// Name is the display name (directory, CDR readers).
	Name string `json:"name,omitempty"`
	// Members are users' extensions, rung in this order (sequential).
	Members []string `json:"members"`
	// Strategy is simultaneous (every member at once, for ring_s),
	// sequential (one after another, ring_s each, in list order),
	// round_robin (as sequential, each call starting one member further)
	// or longest_idle (as sequential, from the member whose last group
	// call ended longest ago).
	Strategy string `json:"strategy,omitempty"`
	// RingS is how long a member rings.
	RingS int `json:"ring_s,omitempty"`
	// TotalS bounds the ringing before the overflow; 0 = the members'
	// ring times.
	TotalS int `json:"total_s,omitempty"`
	// Overflow takes a call nobody answered: a number dialled as a user
	// would (an extension, another group, a PSTN number), or "voicemail"
	// (hq.voicemail_pilot, with the group as the diverting user); empty =
	// the caller gets 480 (486 when every member was busy).
	Overflow string `json:"overflow,omitempty"`
	// QueueS, when set, queues a call nobody answered: the box answers
	// it, the caller hears music on hold, and the first member to be
	// free (registered, not in a call, not in do-not-disturb) is rung,
	// for up to this long; then the overflow.
	QueueS int `json:"queue_s,omitempty"`
}

// Park is call park: a phone blind-transfers its call to *85 (the first
// free orbit) or to an orbit; the other party waits there on music on
// hold until a local phone dials the orbit. A call nobody retrieves
// within timeout_s rings the parker again, then the overflow, else it is
// hung up.
type Park struct {
	// First is the first orbit's extension: digits.
	First string `json:"first"`
	// Last is the last orbit's extension: digits, as many as First's.
	Last string `json:"last"`
	// TimeoutS is how long a call waits parked before it rings the
	// parker.
	TimeoutS int `json:"timeout_s,omitempty"`
	// Overflow is dialled, as the parker would, when the parker does not
	// answer the ring-back; empty = the parked party is hung up.
	Overflow string `json:"overflow,omitempty"`
}

// VoicemailKind is users[].voicemail.
type VoicemailKind string

// The kinds of users[].voicemail.
const (
	VoicemailNone     VoicemailKind = "none"
	VoicemailHQ       VoicemailKind = "hq"
	VoicemailLocal    VoicemailKind = "local"
	VoicemailFallback VoicemailKind = "fallback"
)

// UnmarshalJSON takes a kind, or a boolean (true: fallback, false: none).
func (k *VoicemailKind) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "true":
		*k = VoicemailFallback
		return nil
	case "false", "null":
		*k = ""
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a string or a boolean")
	}
	*k = VoicemailKind(s)
	return nil
}

// Pilot reports whether calls go to hq.voicemail_pilot (hq, fallback).
func (k VoicemailKind) Pilot() bool { return k == VoicemailHQ || k == VoicemailFallback }

// On reports whether the user has voicemail.
func (k VoicemailKind) On() bool { return k != "" && k != VoicemailNone }

// Voicemail is the box's own voicemail: limits of its recordings and
// mailboxes (zero: the default).
type Voicemail struct {
	// MaxMessageS is the longest message, in seconds.
	MaxMessageS int `json:"max_message_s,omitempty"`
	// SilenceS is the silence that ends a recording; -1 = none does.
	SilenceS int `json:"silence_s,omitempty"`
	// NoMediaS: a caller who sends no audio for that long after the beep
	// is hung up.
	NoMediaS int `json:"no_media_s,omitempty"`
	// MailboxMessages is how many messages (heard or not) a mailbox
	// keeps; a caller into a full mailbox is told so.
	MailboxMessages int `json:"mailbox_messages,omitempty"`
	// TotalMB is the audio the box keeps in all, in MiB.
	TotalMB int `json:"total_mb,omitempty"`
}

// Voicemail defaults.
const (
	DefaultVoicemailMaxMessageS = 180
	DefaultVoicemailSilenceS    = 10
	DefaultVoicemailNoMediaS    = 10
	DefaultVoicemailMessages    = 100
	DefaultVoicemailTotalMB     = 256
)

// EffectiveMaxMessageS is max_message_s or its default.
func (v Voicemail) EffectiveMaxMessageS() int {
	return cmp.Or(v.MaxMessageS, DefaultVoicemailMaxMessageS)
}

// EffectiveSilenceS is silence_s or its default (-1: none).
func (v Voicemail) EffectiveSilenceS() int { return cmp.Or(v.SilenceS, DefaultVoicemailSilenceS) }

// EffectiveNoMediaS is no_media_s or its default.
func (v Voicemail) EffectiveNoMediaS() int { return cmp.Or(v.NoMediaS, DefaultVoicemailNoMediaS) }

// EffectiveMailboxMessages is mailbox_messages or its default.
func (v Voicemail) EffectiveMailboxMessages() int {
	return cmp.Or(v.MailboxMessages, DefaultVoicemailMessages)
}

// EffectiveTotalMB is total_mb or its default.
func (v Voicemail) EffectiveTotalMB() int { return cmp.Or(v.TotalMB, DefaultVoicemailTotalMB) }

// maxOrbits bounds park.first..park.last.
const maxOrbits = 100

// Orbits are the orbit extensions, first to last; nil when the range is
// invalid (Validate refuses it).
func (p *Park) Orbits() []string {
	if p == nil || len(p.First) != len(p.Last) || !allDigits(p.First) || !allDigits(p.Last) {
		return nil
	}
	first, err1 := strconv.Atoi(p.First)
	last, err2 := strconv.Atoi(p.Last)
	if err1 != nil || err2 != nil || last < first || last-first >= maxOrbits {
		return nil
	}
	out := make([]string, 0, last-first+1)
	for n := first; n <= last; n++ {
		out = append(out, fmt.Sprintf("%0*d", len(p.First), n))
	}
	return out
}

// EffectiveTimeoutS is park.timeout_s with its default.
func (p *Park) EffectiveTimeoutS() int {
	if p.TimeoutS == 0 {
		return 60
	}
	return p.TimeoutS
}

func allDigits(s string) bool {
	if s == "" || len(s) > 8 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// PickupGroup is a set of users who may pick up each other's calls.
type PickupGroup struct {
	// Name names the group in logs and the status page.
	Name string `json:"name,omitempty"`
	// Members are users' extensions, at least two.
	Members []string `json:"members"`
}

// EffectiveStrategy is the group's strategy in force.
func (g Group) EffectiveStrategy() string {
	if g.Strategy == "" {
		return "simultaneous"
	}
	return g.Strategy
}

// EffectiveRingS is how long a member rings, in seconds.
func (g Group) EffectiveRingS() int {
	if g.RingS == 0 {
		return 15
	}
	return g.RingS
}

// Forward is where a user's calls go instead of ringing the user's
// phones. Each number is dialled as the user would dial it: routed by the
// dial plan of the mode the call is in (a forward to an HQ extension goes
// over the PSTN in survivable mode).
type Forward struct {
	// Always forwards every call (*72 number to set, *73 to clear).
	Always string `json:"always,omitempty"`
	// Busy forwards a call the user's phones refuse busy, or that DND
	// refuses (*90 number, *91).
	Busy string `json:"busy,omitempty"`
	// NoAnswer forwards a call nobody answered within no_answer_s (*92
	// number, *93).
	NoAnswer string `json:"no_answer,omitempty"`
	// NoAnswerS is the ring time before no_answer; 0 = the voicemail ring
	// time.
	NoAnswerS int `json:"no_answer_s,omitempty"`
}

// HQ is the head office: where upstream registrations and HQ-bound calls go
// and how its health is probed. An empty HQ (no domain, no targets) makes the
// box standalone.
type HQ struct {
	// Domain is HQ's SIP domain, resolved per RFC 3263 (NAPTR, SRV, A/AAAA).
	Domain string `json:"domain,omitempty"`
	// MediaZone is the media zone of HQ's leg of a call, in place of
	// site.zone; empty = site.zone.
	MediaZone string `json:"media_zone,omitempty"`
	// MediaSite is the media site of HQ's leg, in place of site.site;
	// empty = site.site.
	MediaSite string `json:"media_site,omitempty"`
	// Targets are static SIP targets ([transport:]host[:port], the prefix
	// overriding hq.transport).
	Targets []string `json:"targets,omitempty"`
	// Transport is the transport towards HQ: udp, tcp or tls.
	Transport string `json:"transport,omitempty"`
	// SRVService is the SRV service label of Domain's lookup, e.g.
	// "_sipinternaltls._tcp" for a Lync/Skype pool; empty = by transport:
	// _sip._udp, _sip._tcp, or for tls _sips._tcp then _sip._tls.
	SRVService string `json:"srv_service,omitempty"`
	// CAPEM is the CA bundle that signs HQ's TLS certificates (transport
	// tls). The certificate must name hq.domain, or the static target's
	// host when there is no domain.
	CAPEM string `json:"ca_pem,omitempty"`
	// ClientCertPEM is the box's certificate (chain, leaf first) for
	// mutual TLS with HQ.
	ClientCertPEM string `json:"client_cert_pem,omitempty"`
	// ClientKeyPEM is the private key of hq.client_cert_pem.
	ClientKeyPEM string `json:"client_key_pem,omitempty"`
	// DNSServers are the resolvers (IP:port) for hq.domain and
	// hq.backup.domain.
	DNSServers []string `json:"dns_servers,omitempty"`
	// OptionsIntervalMS is the period of the OPTIONS probe of every HQ
	// target, in milliseconds.
	OptionsIntervalMS int `json:"options_interval_ms,omitempty"`
	// DownAfter is the number of failed probes in a row before HQ is down
	// (the box goes survivable).
	DownAfter int `json:"down_after,omitempty"`
	// UpAfter is the number of good probes in a row before HQ is up again.
	UpAfter int `json:"up_after,omitempty"`
	// HoldS is how long HQ must stay up before the box fails back to
	// normal mode, in seconds.
	HoldS int `json:"hold_s,omitempty"`
	// Failover is how a call tries HQ's targets one after another (its
	// backup pool's too, unless hq.backup.failover says otherwise).
	Failover Failover `json:"failover,omitzero"`
	// RegisterUpstream registers the box at HQ as a trunk, with
	// auth_username and auth_password.
	RegisterUpstream bool `json:"register_upstream,omitempty"`
	// AuthUsername is the box's trunk user name at HQ.
	AuthUsername string `json:"auth_username,omitempty"`
	// AuthPassword is the box's trunk password at HQ.
	AuthPassword string `json:"auth_password,omitempty"`
	// VoicemailPilot is the number at HQ that takes the users' voicemail.
	VoicemailPilot string `json:"voicemail_pilot,omitempty"`
	// PSTNPrefix turns a number the dial plan routes to HQ into an E.164
	// number in survivable mode (prefix + the rule's translated number),
	// for rules without a survivable alternative.
	PSTNPrefix string `json:"pstn_prefix,omitempty"`
	// CallFallback: a call whose every HQ target fails by the retry rule
	// (408, 503, 504, timeout, transport error) goes out at once by its
	// survivable route (the rule's alternative or pstn_prefix), in normal
	// mode, without waiting for the probes.
	CallFallback *bool `json:"call_fallback,omitempty"`
	// Backup is a second HQ pool, used only when every target of the
	// primary pool has failed (calls, then its own probes): the box goes
	// survivable only when both pools are down.
	Backup *HQBackup `json:"backup,omitempty"`
	// TrustedNetworks are CIDRs ("198.18.8.0/24", "2001:db8:8::/48") whose
	// every address is trusted as HQ, on any port and transport: for a
	// softswitch with many servers. Without them HQ is trusted only from
	// its targets (see README, "Trust by address").
	TrustedNetworks []string `json:"trusted_networks,omitempty"`
}

// HQBackup is the backup HQ pool: a domain (RFC 3263) and/or static
// targets, resolved with hq.dns_servers and probed like the primary.
type HQBackup struct {
	// Domain is the backup pool's SIP domain, resolved per RFC 3263.
	Domain string `json:"domain,omitempty"`
	// Targets are the backup pool's static targets ([transport:]host[:port],
	// the prefix overriding hq.backup.transport).
	Targets []string `json:"targets,omitempty"`
	// Transport is the transport towards the backup pool: udp, tcp or tls.
	Transport string `json:"transport,omitempty"`
	// SRVService is as hq.srv_service, for hq.backup.domain. TLS (CA,
	// client certificate) is hq's.
	SRVService string `json:"srv_service,omitempty"`
	// Failover is how a call tries the backup pool's targets; absent =
	// hq.failover.
	Failover *Failover `json:"failover,omitempty"`
}

// EffectiveTransport is hq.backup.transport, default "udp".
func (b HQBackup) EffectiveTransport() string { return orDefaultString(b.Transport, DefaultTransport) }

// PSTN is the local PSTN breakout.
type PSTN struct {
	// Gateways are the local PSTN gateways (FXO ports, SBCs), tried in
	// order for a call routed to pstn.
	Gateways []Gateway `json:"gateways,omitempty"`
	// Emergency numbers always go to the PSTN, in every mode.
	Emergency []string `json:"emergency,omitempty"`
	// OptionsIntervalMS is the period of the OPTIONS probe of every
	// gateway, in milliseconds; 0 = no probes. Either way a gateway whose
	// call attempt fails by the retry rule (408, 503, 504, no response) is
	// blocked for a while; probes also take a silent gateway out and back
	// before a call has to find out.
	OptionsIntervalMS int `json:"options_interval_ms,omitempty"`
	// Failover is how a call tries the gateways one after another.
	Failover Failover `json:"failover,omitzero"`
}

// Failover is how a call tries the targets of a route one after another:
// the client failover rules of the softswitch or gateways behind it.
type Failover struct {
	// AttemptTimeoutMS bounds the wait for a first response (a 100
	// Trying is one) from one target before the next is tried, in
	// milliseconds.
	AttemptTimeoutMS int `json:"attempt_timeout_ms,omitempty"`
	// MaxTargets is how many of the route's targets one call tries; 0 =
	// all.
	MaxTargets int `json:"max_targets,omitempty"`
	// Retry5xx are 5xx answers that also move on to the next target
	// (503 and 504 always do), e.g. 500 and 502.
	Retry5xx []int `json:"retry_5xx,omitempty"`
}

// EffectiveAttemptTimeout is attempt_timeout_ms (default 4 s).
func (f Failover) EffectiveAttemptTimeout() time.Duration {
	if f.AttemptTimeoutMS > 0 {
		return time.Duration(f.AttemptTimeoutMS) * time.Millisecond
	}
	return 4 * time.Second
}

// OptionsInterval is pstn.options_interval_ms as a duration (0 = no probes).
func (p PSTN) OptionsInterval() time.Duration {
	return time.Duration(p.OptionsIntervalMS) * time.Millisecond
}

// Gateway is one PSTN gateway.
type Gateway struct {
	// Name names the gateway in logs and status.
	Name string `json:"name"`
	// Target is where the gateway is reached: [transport:]host[:port]
	// (siptarget), the prefix overriding transport.
	Target string `json:"target"`
	// Transport is the transport towards the gateway: udp, tcp or tls.
	Transport string `json:"transport,omitempty"`
	// MediaZone is the media zone of the gateway's leg, in place of
	// site.zone; empty = site.zone.
	MediaZone string `json:"media_zone,omitempty"`
	// MediaSite is the media site of the gateway's leg, in place of
	// site.site; empty = site.site.
	MediaSite string `json:"media_site,omitempty"`
}

// Rule is one outbound dial plan rule; rules are tried in order.
type Rule struct {
	// Name names the rule in logs and traces.
	Name string `json:"name,omitempty"`
	// Match is a Go regular expression on the dialled number.
	Match string `json:"match"`
	// Route is where a matching call goes: local (a user of this box), hq
	// or pstn.
	Route string `json:"route"`
	// Strip is the number of leading characters removed from the number.
	Strip int `json:"strip,omitempty"`
	// Prepend is the prefix added after strip.
	Prepend string `json:"prepend,omitempty"`
	// Survivable, when set, replaces route, strip and prepend in
	// survivable mode.
	Survivable *Survivable `json:"survivable,omitempty"`
}

// Survivable is a rule's alternative in survivable mode.
type Survivable struct {
	// Route is where a matching call goes in survivable mode: local, hq or
	// pstn.
	Route string `json:"route"`
	// Strip is the number of leading characters removed in survivable mode.
	Strip int `json:"strip,omitempty"`
	// Prepend is the prefix added after strip in survivable mode.
	Prepend string `json:"prepend,omitempty"`
}

// InboundRule maps a DID called from the PSTN to an extension: when Match
// (Go regexp) matches the called number, the extension is
// Match.ReplaceAllString(number, To), so "$1" refers to a group. Rules are
// tried in order; a rule whose result is not a known extension falls through
// to the next rule.
type InboundRule struct {
	// Match is a Go regular expression on the called number.
	Match string `json:"match"`
	// To is the extension, or a template of it: "$1", "${name}" are
	// groups of match, "$$" is a "$".
	To string `json:"to"`
}

// WAN names the uplink whose link/route state drives survivable mode.
type WAN struct {
	// Interface is the uplink's interface name; empty = the link state
	// plays no part.
	Interface string `json:"interface,omitempty"`
}

// Media is the RTP relay.
type Media struct {
	// Relay anchors every call's media in the box's relay (NAT, VLAN
	// separation, statistics); false = only calls whose two legs face
	// different local addresses, or that need SRTP.
	Relay bool `json:"relay,omitempty"`
	// PortMin is the first RTP port of the relay (even: RTCP on the odd
	// port above).
	PortMin int `json:"port_min,omitempty"`
	// PortMax is the last RTP/RTCP port of the relay.
	PortMax int `json:"port_max,omitempty"`
	// Interfaces names the interfaces of the media relay. Validated
	// (Linux interface names, no duplicates) but not yet used: the relay
	// serves every interface.
	Interfaces []string `json:"interfaces,omitempty"`
	// Codecs are the codecs offered and accepted, in preference order.
	Codecs []string `json:"codecs,omitempty"`
	// InactivityS ends a call whose relayed, not-held media has been silent
	// this long (a phone that lost power sends no BYE), in seconds.
	InactivityS int `json:"inactivity_s,omitempty"`
	// SRTP is the SDES-SRTP (RFC 4568) policy of every relayed leg: "off"
	// (plain RTP only), "offer" (offer RTP/SAVP with the box's keys,
	// accept RTP) or "require" (no SRTP, no call: 488).
	SRTP string `json:"srtp,omitempty"`
	// SRTPRoutes overrides SRTP for the leg a call is routed to, by the
	// dial plan's route: "local", "hq", "pstn".
	SRTPRoutes map[string]string `json:"srtp_routes,omitempty"`
	// SRTPInterfaces overrides SRTP for a leg by the interface its media
	// faces (the one holding the box's address on that leg), by interface
	// name: {"lan0": "offer", "wan0": "require"}. A route's entry in
	// SRTPRoutes wins over it for the leg the call is routed to.
	SRTPInterfaces map[string]string `json:"srtp_interfaces,omitempty"`
	// MusicOnHold is what a held party hears on a call the relay anchors:
	// a WAV file in base64 (8 kHz mono, 16-bit PCM, A-law or µ-law, at
	// most 60 s), "off" for nothing of the box's, or empty for the
	// recording shipped in the image.
	MusicOnHold string `json:"music_on_hold,omitempty"`
}

// MusicOnHoldWAV is media.music_on_hold decoded: nil for the image's
// recording or "off" (MusicOnHoldOff tells them apart), an error when it
// is not base64.
func (m Media) MusicOnHoldWAV() ([]byte, error) {
	if m.MusicOnHold == "" || m.MusicOnHoldOff() {
		return nil, nil
	}
	return base64.StdEncoding.DecodeString(m.MusicOnHold)
}

// MusicOnHoldOff reports media.music_on_hold "off".
func (m Media) MusicOnHoldOff() bool { return m.MusicOnHold == "off" }

// SRTP policies of media.srtp and media.srtp_routes.
const (
	SRTPOff     = "off"
	SRTPOffer   = "offer"
	SRTPRequire = "require"
)

// EffectiveSRTP is media.srtp, default "off".
func (m Media) EffectiveSRTP() string { return cmp.Or(m.SRTP, SRTPOff) }

// SRTPForInterface is the policy of a leg whose media faces interface
// ifname: its media.srtp_interfaces entry, else media.srtp.
func (m Media) SRTPForInterface(ifname string) string {
	if p, ok := m.SRTPInterfaces[ifname]; ok && p != "" {
		return p
	}
	return m.EffectiveSRTP()
}

// SRTPFor is the policy of a leg the dial plan routed with route: its
// media.srtp_routes entry, else media.srtp.
func (m Media) SRTPFor(route string) string {
	if p, ok := m.SRTPRoutes[route]; ok && p != "" {
		return p
	}
	return m.EffectiveSRTP()
}

// MSR is the per-interface media-server registration towards HQ.
type MSR struct {
	// Enabled registers the box's media resources at msr.servers and
	// accepts other media servers' MSR registrations.
	Enabled bool `json:"enabled,omitempty"`
	// Name is the box's MSR name at the softswitch.
	Name string `json:"name,omitempty"`
	// Servers are the softswitches the box registers at: [udp:]host[:port]
	// (siptarget; port 5060 when omitted).
	Servers []string `json:"servers,omitempty"`
	// ServiceInterface is the interface the MSR signalling and control
	// channel use.
	ServiceInterface string `json:"service_interface,omitempty"`
	// Interfaces are the interfaces (names or globs) registered as media
	// resources, one MSR UA each.
	Interfaces []string `json:"interfaces,omitempty"`
	// Username is the MSR digest user name, at the servers and for other
	// media servers registering here.
	Username string `json:"username,omitempty"`
	// Password is the MSR digest password.
	Password string `json:"password,omitempty"`
	// RegisterIntervalS is the re-registration period of a confirmed UA,
	// in seconds.
	RegisterIntervalS int `json:"register_interval_s,omitempty"`
	// RetryIntervalS is the retry period of a UA the server did not
	// confirm, in seconds.
	RetryIntervalS int `json:"retry_interval_s,omitempty"`
	// ControlPort is the TCP port of the control channel.
	ControlPort int `json:"control_port,omitempty"`
	// HeaderPrefix is the prefix of the MSR headers (…Name, …Iface-Name).
	HeaderPrefix string `json:"header_prefix,omitempty"`
	// ContactID is the {msr-contact-id} of every UA URI and the Acc-Id
	// header.
	ContactID string `json:"contact_id,omitempty"`
	// CapacityPPS is the relay's RTP packet rate announced as 100 % load
	// (bench/RESULTS.md: the relay's loss-free rate on half a core). The
	// announced load is max(CPU %, packets/s ÷ capacity_pps).
	CapacityPPS int `json:"capacity_pps,omitempty"`
	// ControlAllow are CIDRs allowed to open the control channel besides
	// the addresses the servers resolve to (always allowed); empty = those
	// addresses only.
	ControlAllow []string `json:"control_allow,omitempty"`
}

// MediaResources drives the choice between media resources.
type MediaResources struct {
	// Matrix is site → site → distance; a missing entry forbids the pair
	// (a site's distance to itself is 0 when missing), 0 means "equal".
	Matrix map[string]map[string]int `json:"matrix,omitempty"`
	// Performance is MSR name → coefficient; a missing name has the
	// default.
	Performance map[string]float64 `json:"performance,omitempty"`
	// Inactive are MSR names taken out of selection on every box that
	// gets the document, until a document lists them no more (a box's
	// outpostctl media-resources set NAME inactive is its own, and kept
	// across restarts too; either makes the MSR inactive).
	Inactive []string `json:"inactive,omitempty"`
	// Placement assigns MSRs a zone and site, in place of the ones their
	// REGISTERs declare.
	Placement []Placement `json:"placement,omitempty"`
}

// Placement is HQ's zone and site of one MSR.
type Placement struct {
	// MSR is the MSR's name.
	MSR string `json:"msr"`
	// Zone replaces the zone the MSR declares; empty = the declared one.
	Zone string `json:"zone,omitempty"`
	// Site replaces the site the MSR declares; empty = the declared one.
	Site string `json:"site,omitempty"`
}

// Management is the remote management API (mutual TLS).
type Management struct {
	// Listen is the API's address, IP:port; empty = no remote API.
	Listen string `json:"listen,omitempty"`
	// CertPEM is the API's server certificate chain in PEM, leaf first.
	CertPEM string `json:"cert_pem,omitempty"`
	// KeyPEM is the private key of management.cert_pem.
	KeyPEM string `json:"key_pem,omitempty"`
	// ClientCAPEM is the CA bundle that signs the clients' certificates:
	// with it the API requires one (mutual TLS).
	ClientCAPEM string `json:"client_ca_pem,omitempty"`
	// AllowedClients restricts which certificates signed by client_ca_pem
	// may use the API: a client is allowed when its certificate's subject
	// CN, or one of its subject alternative names (DNS name, email address
	// or URI), equals an entry.
	AllowedClients []string `json:"allowed_clients,omitempty"`
	// RevokedSerials are serial numbers of client certificates that may no
	// longer use the API although the CA signed them: hexadecimal, colons
	// between bytes allowed, any case ("0A:1B:..." = "0a1b...").
	RevokedSerials []string `json:"revoked_serials,omitempty"`
}

// Capture sends a copy of every SIP message the box sends and receives to
// a Homer capture server (HEPv3). Empty = no export (outpostctl trace
// works without it).
type Capture struct {
	// HEPServer is the capture server: "udp:HOST:PORT" or "tcp:HOST:PORT".
	HEPServer string `json:"hep_server,omitempty"`
	// NodeID is the capture agent id Homer shows for this box (HEP carries
	// 32 bits).
	NodeID int64 `json:"node_id,omitempty"`
	// Password is the HEP auth key; empty = none.
	Password string `json:"password,omitempty"`
}

// Pool is a registrar pool: two or more boxes serving one branch without
// shared state. Every member gets the same document; each user's members
// are ordered by rendezvous hashing of the user's address over the
// members' names (gateway/rendezvous), the first healthy one serves it,
// and members learn each other's health by OPTIONS.
type Pool struct {
	// Self is this box's name among pool.members.
	Self string `json:"self"`
	// Members lists every member, this box included.
	Members []PoolMember `json:"members"`
	// OptionsIntervalMS is the period of the OPTIONS probe of the other
	// members, in milliseconds.
	OptionsIntervalMS int `json:"options_interval_ms,omitempty"`
	// DownAfter is the number of failed probes before a member is down.
	DownAfter int `json:"down_after,omitempty"`
	// UpAfter is the number of good probes before a member is up again.
	UpAfter int `json:"up_after,omitempty"`
	// HoldS is how long a recovered member must stay healthy before its
	// users are sent back to it (failback), in seconds.
	HoldS int `json:"hold_s,omitempty"`
	// Secret keys the HMAC that INVITEs between members carry (trust by
	// address and secret, never by address alone).
	Secret string `json:"secret,omitempty"`
}

// PoolMember is one box of the pool.
type PoolMember struct {
	// Name is the member's name; the rendezvous hash orders members by it.
	Name string `json:"name"`
	// Target is where its phones and the other members reach it:
	// [transport:]host[:port] (siptarget), udp or tcp, with an IP address.
	Target string `json:"target"`
}

// EffectiveOptionsInterval is pool.options_interval_ms (default 1 s).
func (p Pool) EffectiveOptionsInterval() time.Duration {
	return time.Duration(orDefault(p.OptionsIntervalMS, DefaultOptionsIntervalMS)) * time.Millisecond
}

// EffectiveDownAfter is pool.down_after (default 3).
func (p Pool) EffectiveDownAfter() int { return orDefault(p.DownAfter, DefaultDownAfter) }

// EffectiveUpAfter is pool.up_after (default 3).
func (p Pool) EffectiveUpAfter() int { return orDefault(p.UpAfter, DefaultUpAfter) }

// EffectiveHold is pool.hold_s (default 10 s).
func (p Pool) EffectiveHold() time.Duration {
	return time.Duration(orDefault(p.HoldS, DefaultHoldS)) * time.Second
}

// Status is the local read-only status page (HTTP Basic for the users
// with admin set).
type Status struct {
	// Listen is the status page's address, IP:port (port 0 = any free
	// port); empty = no status page.
	Listen string `json:"listen,omitempty"`
}

// Defaults of the Effective* methods.
const (
	DefaultMinExpires    = 60
	DefaultMaxExpires    = 3600
	DefaultAuthFailLimit = 10
	DefaultStormRate     = 2000
	// DefaultChallengeRate: enough for a site whose phones share one
	// address behind NAT placing calls at once, little enough that a flood
	// of forged INVITEs costs the box (and its claimed source) nothing much.
	DefaultChallengeRate     = 200
	DefaultRetryAfterS       = 5
	DefaultPersistIntervalMS = 1000
	DefaultTransport         = "udp"
	DefaultOptionsIntervalMS = 1000
	DefaultDownAfter         = 3
	DefaultUpAfter           = 3
	DefaultHoldS             = 10
	DefaultPortMin           = 20000
	DefaultPortMax           = 29999
	DefaultMediaInactivityS  = 30
	DefaultMSRUsername       = "msr"
	DefaultMSRPassword       = "mediaserver"
	DefaultMSRRegisterS      = 300
	DefaultMSRRetryS         = 600
	DefaultMSRControlPort    = 5700
	DefaultMSRHeaderPrefix   = "P-Eltex-MSR-"
	DefaultMSRContactID      = "1"
	DefaultMSRCapacityPPS    = 50000
	DefaultPerformance       = 1.0
)

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func orDefaultString(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// EffectiveRealm is the digest realm: sip.realm, or site.domain when unset.
func (s SIP) EffectiveRealm(site Site) string { return orDefaultString(s.Realm, site.Domain) }

// MinExpires is the smallest accepted registration expiry in seconds (default 60).
func (s SIP) MinExpires() int { return orDefault(s.MinExpiresS, DefaultMinExpires) }

// MaxExpires is the largest granted registration expiry in seconds (default 3600).
func (s SIP) MaxExpires() int { return orDefault(s.MaxExpiresS, DefaultMaxExpires) }

// DefaultDrainS is the drain time when sip.drain_s is 0: a minute lets
// most calls that were about to end do so, and is short enough for a
// technician waiting on a reboot.
const DefaultDrainS = 60

// EffectiveDrain is how long calls in progress may go on once the box
// begins to stop.
func (s SIP) EffectiveDrain() time.Duration {
	return time.Duration(orDefault(s.DrainS, DefaultDrainS)) * time.Second
}

// DigestAlgorithms returns the challenge algorithms in order (a copy;
// default ["MD5", "SHA-256"]).
func (s SIP) DigestAlgorithms() []string {
	if len(s.Digest) == 0 {
		return []string{"MD5"}
	}
	return append([]string(nil), s.Digest...)
}

// Listeners parses every sip.listen spec; the error is the first bad one.
func (s SIP) Listeners() ([]Listen, error) {
	out := make([]Listen, 0, len(s.Listen))
	for _, spec := range s.Listen {
		l, err := ParseListen(spec)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// EffectiveAuthFailLimit is failed authentications per source per minute
// before slowing down (default 10).
func (r Registrar) EffectiveAuthFailLimit() int {
	return orDefault(r.AuthFailLimit, DefaultAuthFailLimit)
}

// EffectiveStormRate is new registrations admitted per second before 503
// (default 2000). A negative result means no limit.
func (r Registrar) EffectiveStormRate() int { return orDefault(r.StormRate, DefaultStormRate) }

// EffectiveChallengeRate is the stateless refusals per source IP per
// second (-1 = no limit).
func (r Registrar) EffectiveChallengeRate() int {
	return orDefault(r.ChallengeRate, DefaultChallengeRate)
}

// EffectiveRetryAfter is the storm guard's Retry-After (default 5 s).
func (r Registrar) EffectiveRetryAfter() time.Duration {
	return time.Duration(orDefault(r.RetryAfterS, DefaultRetryAfterS)) * time.Second
}

// EffectivePersistInterval is the write-behind period of bindings (default 1 s).
func (r Registrar) EffectivePersistInterval() time.Duration {
	return time.Duration(orDefault(r.PersistIntervalMS, DefaultPersistIntervalMS)) * time.Millisecond
}

// EffectiveCallFallback is hq.call_fallback, default true.
func (h HQ) EffectiveCallFallback() bool { return h.CallFallback == nil || *h.CallFallback }

// EffectiveTransport is hq.transport, default "udp".
func (h HQ) EffectiveTransport() string { return orDefaultString(h.Transport, DefaultTransport) }

// EffectiveOptionsInterval is the OPTIONS probe period (default 1 s).
func (h HQ) EffectiveOptionsInterval() time.Duration {
	return time.Duration(orDefault(h.OptionsIntervalMS, DefaultOptionsIntervalMS)) * time.Millisecond
}

// EffectiveDownAfter is the number of failed probes before HQ is down (default 3).
func (h HQ) EffectiveDownAfter() int { return orDefault(h.DownAfter, DefaultDownAfter) }

// EffectiveUpAfter is the number of good probes before HQ is up (default 3).
func (h HQ) EffectiveUpAfter() int { return orDefault(h.UpAfter, DefaultUpAfter) }

// EffectiveHold is how long HQ must stay healthy before failback (default 10 s).
func (h HQ) EffectiveHold() time.Duration {
	return time.Duration(orDefault(h.HoldS, DefaultHoldS)) * time.Second
}

// EffectiveTransport is the gateway's transport, default "udp".
func (g Gateway) EffectiveTransport() string { return orDefaultString(g.Transport, DefaultTransport) }

// EffectivePortMin is the first RTP port (default 20000).
func (m Media) EffectivePortMin() int { return orDefault(m.PortMin, DefaultPortMin) }

// EffectivePortMax is the last RTP port (default 29999).
func (m Media) EffectivePortMax() int { return orDefault(m.PortMax, DefaultPortMax) }

// EffectiveInactivity is the media inactivity timeout (default 30 s).
func (m Media) EffectiveInactivity() time.Duration {
	return time.Duration(orDefault(m.InactivityS, DefaultMediaInactivityS)) * time.Second
}

// EffectiveCodecs is the codec list in preference order (a copy; default
// PCMU, PCMA, telephone-event).
func (m Media) EffectiveCodecs() []string {
	if len(m.Codecs) == 0 {
		return []string{"PCMU", "PCMA", "telephone-event"}
	}
	return append([]string(nil), m.Codecs...)
}

// EffectiveServiceInterface is msr.service_interface, default wan.interface.
func (m MSR) EffectiveServiceInterface(w WAN) string {
	return orDefaultString(m.ServiceInterface, w.Interface)
}

// EffectiveInterfaces is the interface filter (a copy; default ["*"]).
func (m MSR) EffectiveInterfaces() []string {
	if len(m.Interfaces) == 0 {
		return []string{"*"}
	}
	return append([]string(nil), m.Interfaces...)
}

// EffectiveUsername is msr.username, default "msr".
func (m MSR) EffectiveUsername() string { return orDefaultString(m.Username, DefaultMSRUsername) }

// EffectivePassword is msr.password, default "mediaserver".
func (m MSR) EffectivePassword() string { return orDefaultString(m.Password, DefaultMSRPassword) }

// EffectiveRegisterInterval is the re-registration period (default 300 s).
func (m MSR) EffectiveRegisterInterval() time.Duration {
	return time.Duration(orDefault(m.RegisterIntervalS, DefaultMSRRegisterS)) * time.Second
}

// EffectiveRetryInterval is the retry period of an unconfirmed UA (default 600 s).
func (m MSR) EffectiveRetryInterval() time.Duration {
	return time.Duration(orDefault(m.RetryIntervalS, DefaultMSRRetryS)) * time.Second
}

// EffectiveControlPort is the control-channel TCP port (default 5700).
func (m MSR) EffectiveControlPort() int { return orDefault(m.ControlPort, DefaultMSRControlPort) }

// EffectiveControlAllow is msr.control_allow parsed (an entry Validate
// refuses is left out).
func (m MSR) EffectiveControlAllow() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range m.ControlAllow {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// EffectiveContactID is msr.contact_id, default "1".
func (m MSR) EffectiveContactID() string { return orDefaultString(m.ContactID, DefaultMSRContactID) }

// EffectiveCapacityPPS is msr.capacity_pps, default 50000 packets/s.
func (m MSR) EffectiveCapacityPPS() int { return orDefault(m.CapacityPPS, DefaultMSRCapacityPPS) }

// EffectiveHeaderPrefix is the MSR header prefix (default "P-Eltex-MSR-").
func (m MSR) EffectiveHeaderPrefix() string {
	return orDefaultString(m.HeaderPrefix, DefaultMSRHeaderPrefix)
}

// EffectivePerformance is the performance coefficient of an MSR (default 1).
func (r MediaResources) EffectivePerformance(msrName string) float64 {
	if p, ok := r.Performance[msrName]; ok && p > 0 {
		return p
	}
	return DefaultPerformance
}

// Distance returns the distance between two media sites; ok is false when
// the pair is missing from the matrix (forbidden). A site's distance to
// itself is 0 when the matrix omits it.
func (r MediaResources) Distance(from, to string) (d int, ok bool) {
	d, ok = r.Matrix[from][to]
	if !ok && from == to {
		return 0, true
	}
	return d, ok
}

// Standalone reports whether no HQ is configured (no domain, no targets).
func (d *Document) Standalone() bool {
	return d.HQ.Domain == "" && len(d.HQ.Targets) == 0
}

//go:embed default.json
var defaultJSON []byte

// DefaultJSON returns the embedded default document as text.
func DefaultJSON() []byte { return append([]byte(nil), defaultJSON...) }

// Default returns a fresh copy of the embedded default document: standalone,
// listening on 127.0.0.1 only, with demo users 1001-1003 (passwords
// "demo1001"… in clear text: Seal it before storing).
func Default() *Document {
	d, err := Load(defaultJSON)
	if err != nil {
		panic("appliance/config: embedded default is invalid: " + err.Error())
	}
	return d
}
