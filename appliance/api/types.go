package api

import (
	"encoding/json"
	"time"
)

// Version describes one stored config document.
type Version struct {
	Version   int64     `json:"version"`
	AppliedAt time.Time `json:"applied_at"`
	Source    string    `json:"source"`
	SHA256    string    `json:"sha256"`
	Active    bool      `json:"active"`
}

// Status is GET /api/v1/status.
type Status struct {
	Version    string    `json:"version"` // build
	Site       string    `json:"site"`
	Mode       string    `json:"mode"`
	ModeSince  time.Time `json:"mode_since"`
	ModeReason string    `json:"mode_reason"`
	// ModeCause names what keeps the box survivable ("" when healthy).
	ModeCause string `json:"mode_cause,omitempty"`
	// HoldUntil is when failback happens if everything stays healthy.
	HoldUntil     time.Time        `json:"hold_until,omitzero"`
	Transitions   []ModeTransition `json:"mode_transitions"`
	StartedAt     time.Time        `json:"started_at"`
	UptimeS       int64            `json:"uptime_s"`
	ConfigVersion int64            `json:"config_version"`
	ConfigSource  string           `json:"config_source"`
	DataDir       string           `json:"data_dir"`
	Listeners     []string         `json:"listeners"`
	Management    string           `json:"management,omitempty"` // HTTPS (mutual TLS) address, if enabled
	// SIPTLS is the certificate the tls: SIP listeners present: the
	// document's sip.tls, or the box's own (made at first boot).
	SIPTLS *Certificate `json:"sip_tls,omitempty"`
	// StatusPage is the bound address of the local status page, if
	// enabled; StatusPageError says why status.listen is not served.
	StatusPage      string         `json:"status_page,omitempty"`
	StatusPageError string         `json:"status_page_error,omitempty"`
	GOMAXPROCS      int            `json:"gomaxprocs"`
	AORs            int            `json:"aors"`
	Bindings        int            `json:"bindings"`
	Registrar       RegistrarStats `json:"registrar"`
	SIPDropped      uint64         `json:"sip_dropped"` // UDP datagrams dropped unanswered (garbage)
	// HQ is the health of every HQ target (OPTIONS probes and call
	// outcomes); empty without HQ.
	HQ []TargetHealth `json:"hq,omitempty"`
	// HQUnresolved names the HQ pools that have no target because their
	// resolution keeps failing (DNS unreachable since boot): they count
	// as down.
	HQUnresolved []string `json:"hq_unresolved,omitempty"`
	// PSTN is the health of every PSTN gateway, in the configured order
	// (call outcomes by the retry rule, and OPTIONS probes when
	// pstn.options_interval_ms is set); empty without gateways.
	PSTN []GatewayHealth `json:"pstn,omitempty"`
	// Pool is the registrar pool (members, health, users homed here and
	// served as backup); absent for one box.
	Pool *Pool `json:"pool,omitempty"`
	// CallsActive is the number of calls in progress.
	CallsActive int `json:"calls_active"`
	// Draining says new calls are refused (503) until DrainUntil while
	// those in progress finish (a stop, a reboot or outpostctl drain).
	Draining   bool      `json:"draining,omitempty"`
	DrainUntil time.Time `json:"drain_until,omitzero"`
	// Upstream counts the users registered at HQ by state (absent when
	// hq.register_upstream is off).
	Upstream map[string]int `json:"upstream,omitempty"`
	// UpstreamFailed shows a few users whose registration at HQ failed last.
	UpstreamFailed []UpstreamFailure `json:"upstream_failed,omitempty"`
}

// UpstreamFailure is one user whose registration at HQ failed.
type UpstreamFailure struct {
	User   string    `json:"user"`
	Code   int       `json:"code,omitempty"`
	Error  string    `json:"error,omitempty"`
	Target string    `json:"target,omitempty"`
	Retry  time.Time `json:"retry,omitzero"`
}

// ModeTransition is one change of operating mode.
type ModeTransition struct {
	From   string    `json:"from,omitempty"`
	To     string    `json:"to"`
	Reason string    `json:"reason"`
	Detail string    `json:"detail,omitempty"`
	At     time.Time `json:"at"`
}

// GatewayHealth is one PSTN gateway's health: its name, whether it is
// probed, and the target's health (Target is "udp:HOST:PORT").
type GatewayHealth struct {
	Name   string `json:"name"`
	Probed bool   `json:"probed"`
	TargetHealth
}

// TargetHealth is one HQ target's (or PSTN gateway's) health.
type TargetHealth struct {
	Target          string    `json:"target"`
	Up              bool      `json:"up"`
	BlockedUntil    time.Time `json:"blocked_until,omitzero"`
	ConsecutiveOK   int       `json:"consecutive_ok"`
	ConsecutiveFail int       `json:"consecutive_fail"`
	LastRTTMs       float64   `json:"last_rtt_ms"`
	LastChange      time.Time `json:"last_change"`
	Reason          string    `json:"reason"`
	// LastError is why the last probe failed, e.g. "tls: certificate of
	// hq.example.com: x509: certificate signed by unknown authority".
	LastError string `json:"last_error,omitempty"`
}

// RegistrarStats are the registrar's counters since start.
type RegistrarStats struct {
	Registered   uint64 `json:"registered"`
	Unregistered uint64 `json:"unregistered"`
	Expired      uint64 `json:"expired"`
	AuthFailures uint64 `json:"auth_failures"`
	AuthBlocked  uint64 `json:"auth_blocked"`
	StormRefused uint64 `json:"storm_refused"`
	Challenges   uint64 `json:"challenges"`
	Redirected   uint64 `json:"redirected,omitempty"`  // 301s to the user's home member (pool)
	HandedOver   uint64 `json:"handed_over,omitempty"` // bindings dropped on failback (pool)
}

// Pool is the registrar pool as this member sees it (status "pool").
type Pool struct {
	Self    string       `json:"self"`
	Members []PoolMember `json:"members"`
	// HomedHere counts the registered users whose primary is this box;
	// ServedAsBackup those registered here whose primary is another
	// member (down, or back but within its hold).
	HomedHere      int `json:"homed_here"`
	ServedAsBackup int `json:"served_as_backup"`
}

// PoolMember is one member's health, by OPTIONS.
type PoolMember struct {
	Name    string `json:"name"`
	Target  string `json:"target"`
	Self    bool   `json:"self,omitempty"`
	Up      bool   `json:"up"`
	Serving bool   `json:"serving"` // may be its users' home: up, and past the hold after a recovery
	// Since is when its health last changed; Reason why.
	Since  time.Time `json:"since,omitzero"`
	Reason string    `json:"reason,omitempty"`
}

// Registration is one binding, GET /api/v1/registrations.
type Registration struct {
	AOR        string    `json:"aor"`
	Contact    string    `json:"contact"`
	Source     string    `json:"source"`
	Local      string    `json:"local"`
	Expires    time.Time `json:"expires"`
	ExpiresInS int64     `json:"expires_in_s"`
	Registered time.Time `json:"registered"`
	UserAgent  string    `json:"user_agent,omitempty"`
	Instance   string    `json:"instance,omitempty"`
}

// ConfigResponse is GET /api/v1/config: the redacted document and its version.
type ConfigResponse struct {
	Version  Version         `json:"version"`
	Document json.RawMessage `json:"document"`
}

// ApplyResult is the answer to PUT /api/v1/config and rollback.
type ApplyResult struct {
	Version   Version `json:"version"`
	DryRun    bool    `json:"dry_run,omitempty"`
	Unchanged bool    `json:"unchanged,omitempty"` // identical to the running version: nothing stored
	Valid     bool    `json:"valid"`
	// Diff (dry run): what the document would change, one line per
	// changed field, secrets never shown ("~ sip.realm: "a" -> "b"").
	Diff []string `json:"diff,omitempty"`
}

// FieldError is one validation error with its JSON path.
type FieldError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// ErrorBody is every error answer.
type ErrorBody struct {
	Error  string       `json:"error"`
	Errors []FieldError `json:"errors,omitempty"`
}

// RouteResult is GET /api/v1/route/{number}: how a call to the number
// would be routed now, and why.
type RouteResult struct {
	Number     string   `json:"number"`
	Mode       string   `json:"mode"`
	Routed     bool     `json:"routed"`
	Route      string   `json:"route,omitempty"`  // local, hq, pstn
	Target     string   `json:"target,omitempty"` // the number after strip/prepend
	Rule       string   `json:"rule,omitempty"`
	RuleIndex  int      `json:"rule_index"` // -1: no rule (or an emergency number)
	Survivable bool     `json:"survivable,omitempty"`
	Emergency  bool     `json:"emergency,omitempty"`
	Explain    string   `json:"explain"`
	Targets    []string `json:"targets"` // where it would go, in order of trial
}

// MediaLeg is the RTP received from one leg of a relayed call (RFC 3550
// statistics) and what was sent on.
type MediaLeg struct {
	Packets  uint64  `json:"packets"`
	Bytes    uint64  `json:"bytes"`
	Lost     int64   `json:"lost"`
	JitterMs float64 `json:"jitter_ms"`
	Relayed  uint64  `json:"relayed"`
	Port     int     `json:"port,omitempty"` // the box's RTP port facing the leg
	// Protection is the leg's media protection as negotiated:
	// "srtp:AES_CM_128_HMAC_SHA1_80" (the SDES suite, RFC 4568) or "rtp";
	// never key material.
	Protection string `json:"protection,omitempty"`
}

// Call is one call in progress, GET /api/v1/calls.
type Call struct {
	ID       string    `json:"id"`
	From     string    `json:"from"`
	To       string    `json:"to"`     // as dialled
	Target   string    `json:"target"` // after the dial plan
	Route    string    `json:"route"`
	State    string    `json:"state"`
	Started  time.Time `json:"started"`
	Answered time.Time `json:"answered,omitzero"`
	// Media is the relayed RTP per leg (A = caller); absent when the
	// media does not pass through the box.
	Media *[2]MediaLeg `json:"media,omitempty"`
	// Streams are the call's other relayed streams (video, a second
	// audio stream), in SDP order.
	Streams []MediaStream `json:"streams,omitempty"`
}

// MediaStream is one relayed stream besides a call's audio.
type MediaStream struct {
	Kind string      `json:"kind"` // the SDP media type: "video", "audio", "text"
	Legs [2]MediaLeg `json:"legs"` // A = caller
}

// CDR is one call detail record, GET /api/v1/cdr.
type CDR struct {
	ID          int64     `json:"id"`
	CallID      string    `json:"call_id"`
	Started     time.Time `json:"started"`
	Answered    time.Time `json:"answered,omitzero"`
	Ended       time.Time `json:"ended"`
	DurationS   float64   `json:"duration_s"` // answered → ended; 0 if never answered
	Caller      string    `json:"caller"`
	Dialled     string    `json:"dialled"`
	Routed      string    `json:"routed"`
	Route       string    `json:"route"`
	Target      string    `json:"target,omitempty"`
	Mode        string    `json:"mode"`
	Code        int       `json:"code"`
	Disposition string    `json:"disposition"`
	Hangup      string    `json:"hangup,omitempty"`
	Media       string    `json:"media,omitempty"` // per-leg RTP statistics, JSON
}

// Interfaces is GET /api/v1/interfaces: the box's network interfaces as
// the kernel reports them and what Outpost does on each.
type Interfaces struct {
	Links []Link `json:"links"`
	// MSR is the per-interface media-server registration state (empty
	// when msr is disabled).
	MSR []MSRUA `json:"msr,omitempty"`
	// ControlChannel is the softswitch's media-control connection.
	ControlChannel *ControlChannel `json:"control_channel,omitempty"`
}

// Link is one network interface.
type Link struct {
	Name    string   `json:"name"`
	Index   int      `json:"index"`
	Kind    string   `json:"kind"`
	Up      bool     `json:"up"`
	Carrier bool     `json:"carrier"`
	MTU     int      `json:"mtu"`
	VLANID  int      `json:"vlan_id,omitempty"`
	Parent  string   `json:"parent,omitempty"`
	Addrs   []string `json:"addrs"`
	// Roles says what the configuration makes of the link: "wan",
	// "msr-service", "msr", "default-route".
	Roles []string `json:"roles,omitempty"`
}

// MSRUA is one per-interface MSR user agent.
type MSRUA struct {
	Interface  string    `json:"interface"`
	Addr       string    `json:"addr"`
	Server     string    `json:"server"`
	URI        string    `json:"uri"`
	Registered bool      `json:"registered"`
	LastCode   int       `json:"last_code,omitempty"`
	LastError  string    `json:"last_error,omitempty"`
	Next       time.Time `json:"next,omitzero"`
}

// ControlChannel is the state of the MSR control-channel listener
// (RFC 6230 framing) and the softswitch connections it holds.
type ControlChannel struct {
	Listen   string        `json:"listen,omitempty"`
	Error    string        `json:"error,omitempty"` // why it does not listen
	Accepted uint64        `json:"accepted"`
	Refused  uint64        `json:"refused"` // closed unread: not an MSR server's address nor in msr.control_allow
	Dropped  uint64        `json:"dropped"` // closed for keep-alive timeout, bad framing or overload
	Peers    []ControlPeer `json:"peers"`
}

// ControlPeer is one control-channel connection.
type ControlPeer struct {
	Remote     string    `json:"remote"`
	Since      time.Time `json:"since"`
	Synced     bool      `json:"synced"`
	KeepAliveS int       `json:"keep_alive_s"`
	LastRecv   time.Time `json:"last_recv"`
	Requests   uint64    `json:"requests"`
}

// MediaResources is GET /api/v1/media-resources.
type MediaResources struct {
	Zone        string                    `json:"zone,omitempty"` // this box's
	Site        string                    `json:"site,omitempty"`
	Resources   []MediaResource           `json:"resources"`
	Matrix      map[string]map[string]int `json:"matrix,omitempty"` // site → site → distance; missing = forbidden
	Performance map[string]float64        `json:"performance,omitempty"`
	// AdminInactive are the MSRs this box's operator took out of
	// selection (outpostctl media-resources set NAME inactive; kept
	// across restarts), DocumentInactive those the document does
	// (media_resources.inactive), whether or not they have resources.
	AdminInactive    []string `json:"admin_inactive,omitempty"`
	DocumentInactive []string `json:"document_inactive,omitempty"`
}

// MediaResource is one media resource: an interface of this box (Local)
// or an MSR contact registered here.
type MediaResource struct {
	MSR         string    `json:"msr"`
	AccID       string    `json:"acc_id,omitempty"`
	Interface   string    `json:"interface"`
	Addr        string    `json:"addr"`
	Contact     string    `json:"contact,omitempty"`
	Zone        string    `json:"zone,omitempty"`
	Site        string    `json:"site,omitempty"`
	Load        int       `json:"load"`
	Coefficient float64   `json:"coefficient"`
	Registered  bool      `json:"registered"`
	Active      bool      `json:"active"`
	Expires     time.Time `json:"expires,omitzero"`
	Local       bool      `json:"local"`
}

// Certificate describes a certificate the box presents.
type Certificate struct {
	Source   string    `json:"source"` // "document" (sip.tls) or "box" (self-signed, made at first boot)
	Subject  string    `json:"subject"`
	Issuer   string    `json:"issuer"`
	NotAfter time.Time `json:"not_after"`
	// SHA256 is the fingerprint of the DER certificate, colon-separated
	// upper-case hex (what a phone pins or an administrator compares).
	SHA256 string `json:"sha256"`
}
