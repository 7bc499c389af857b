package appliance

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outpost/outpost/appliance/config"
	"github.com/outpost/outpost/appliance/directory"
	"github.com/outpost/outpost/appliance/statuspage"
	"github.com/outpost/outpost/gateway"
	"github.com/outpost/outpost/gateway/b2bua"
	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/gateway/digest"
	"github.com/outpost/outpost/gateway/pool"
	"github.com/outpost/outpost/gateway/registrar"
	"github.com/outpost/outpost/media/moh"
	"github.com/outpost/outpost/media/msr"
	"github.com/outpost/outpost/media/relay"
	"github.com/outpost/outpost/media/selection"
	"github.com/outpost/outpost/media/voicemail"
	"github.com/outpost/outpost/mode"
	"github.com/outpost/outpost/netcfg"
	"github.com/outpost/outpost/siptarget"
)

// partConfigs is one document translated into each part's Config. All
// translation from the stored document to the parts happens here, in
// translate, and nowhere else; testdata/translate holds golden files of it.
type partConfigs struct {
	Gateway    gateway.Config
	Relay      relay.Config
	Anchor     anchorPolicy
	MSR        msr.Config
	Selection  selection.Policy
	Local      localResources
	Places     mediaPlaces
	Mode       mode.Config
	WAN        string // the interface whose link and routes the mode machine watches
	Management mgmtConfig
	Status     statusConfig
	Services   docServices // the users' do-not-disturb and forwards
	Voicemail  voicemail.Limits
	// MSRCapacityPPS is msr.capacity_pps in force (the MSR load's relay
	// share: msr.NewLoad).
	MSRCapacityPPS int
}

// localResources name this box's own addresses as media resources (see
// localChooser): the MSR name (msrName), zone and site.
type localResources struct {
	MSR, Zone, Site string
}

// mediaPlaces are the media zones and sites of the legs that have their
// own (users, HQ, PSTN gateways), in place of the box's.
type mediaPlaces struct {
	Users map[string]place `json:",omitempty"` // by extension
	HQ    place            `json:",omitzero"`
	PSTN  map[string]place `json:",omitempty"` // by gateway target (siptarget form)
}

// place is a leg's media zone and site; an empty field is the box's.
type place struct{ Zone, Site string }

// mediaPlacesOf gathers the document's media_zone and media_site fields.
func mediaPlacesOf(d *config.Document) mediaPlaces {
	p := mediaPlaces{HQ: place{d.HQ.MediaZone, d.HQ.MediaSite}}
	for _, u := range d.Users {
		if u.MediaZone != "" || u.MediaSite != "" {
			if p.Users == nil {
				p.Users = map[string]place{}
			}
			p.Users[u.Extension] = place{u.MediaZone, u.MediaSite}
		}
	}
	for _, g := range d.PSTN.Gateways {
		t, err := siptarget.Parse(g.Target, siptarget.Transport(g.EffectiveTransport()))
		if err == nil && (g.MediaZone != "" || g.MediaSite != "") {
			if p.PSTN == nil {
				p.PSTN = map[string]place{}
			}
			p.PSTN[t.String()] = place{g.MediaZone, g.MediaSite}
		}
	}
	return p
}

// environment is what a translation depends on besides the document: the
// build (for the Server header), the mode the box is in, and the network
// (listen specs that name interfaces become their addresses).
type environment struct {
	Build string
	Mode  mode.Mode
	Net   netcfg.State
	// Hostname is the box's host name (os.Hostname), the MSR name when
	// msr.name is empty.
	Hostname string
}

// translate turns a validated, sealed document into each part's Config.
func translate(d *config.Document, env environment) (*partConfigs, error) {
	g, err := gatewayConfig(d, env.Build, routingMode(d, env.Mode), env.Net)
	if err != nil {
		return nil, err
	}
	return &partConfigs{
		Gateway:    g,
		Relay:      relayConfig(d),
		Anchor:     anchorPolicyOf(d),
		MSR:        msrConfig(d, env.Hostname),
		Selection:  selectionPolicy(d),
		Local:      localResources{MSR: msrName(d, env.Hostname), Zone: d.Site.Zone, Site: d.Site.Site},
		Places:     mediaPlacesOf(d),
		Mode:       mode.Config{HQ: !d.Standalone(), Hold: d.HQ.EffectiveHold()},
		WAN:        d.WAN.Interface,
		Management: mgmtConfig{Management: d.Management},
		Status:     statusPageConfig(d),
		Services:   servicesOf(d),
		Voicemail:  voicemailLimits(d.Voicemail),

		MSRCapacityPPS: d.MSR.EffectiveCapacityPPS(),
	}, nil
}

// statusPageConfig is the status page's section: its listen address, the
// admin users' HA1s in the realm they were computed in, and the directory.
func statusPageConfig(d *config.Document) statusConfig {
	c := statusConfig{Listen: d.Status.Listen, Access: statuspage.Access{Realm: d.SIP.EffectiveRealm(d.Site)}}
	for _, u := range d.Users {
		if u.Admin {
			c.Access.Admins = append(c.Access.Admins, statuspage.Admin{User: u.Extension, HA1MD5: u.HA1MD5, HA1SHA256: u.HA1SHA256})
		}
		c.Directory = append(c.Directory, directory.Entry{Name: u.Name, Extension: u.Extension, DID: u.DID})
	}
	return c
}

// routingMode is the mode a gateway built for d routes in: what the mode
// machine says (running), except that a document with no HQ is standalone
// and one that just gained an HQ starts normal (the machine follows once
// the document is committed).
func routingMode(d *config.Document, running mode.Mode) mode.Mode {
	switch {
	case d.Standalone():
		return mode.Standalone
	case running == mode.Standalone:
		return mode.Normal
	}
	return running
}

// gatewayConfig is the gateway's section of a (validated, sealed) document.
// Listen specs that name interfaces become one listener per address the
// interface has in st.
func gatewayConfig(d *config.Document, build string, m mode.Mode, st netcfg.State) (gateway.Config, error) {
	ls, err := d.SIP.Listeners()
	if err != nil {
		return gateway.Config{}, config.Errors{{Path: "sip.listen", Message: err.Error()}}
	}
	cfg := gateway.Config{ServerName: "outpost/" + build, Listen: listeners(ls, st),
		ChallengeRate: d.SIP.Registrar.EffectiveChallengeRate(),
		TLS:           gateway.TLSCert{CertPEM: d.SIP.TLS.CertPEM, KeyPEM: d.SIP.TLS.KeyPEM}}
	algs := d.SIP.DigestAlgorithms()
	reg := registrar.Config{
		Realm:           d.SIP.EffectiveRealm(d.Site),
		MinExpires:      d.SIP.MinExpires(),
		MaxExpires:      d.SIP.MaxExpires(),
		AuthFailLimit:   d.SIP.Registrar.EffectiveAuthFailLimit(),
		StormRate:       d.SIP.Registrar.EffectiveStormRate(),
		RetryAfter:      d.SIP.Registrar.EffectiveRetryAfter(),
		PersistInterval: d.SIP.Registrar.EffectivePersistInterval(),
		AllowNoQop:      d.SIP.Registrar.AllowRFC2069,
	}
	for _, a := range algs {
		alg, ok := digest.ParseAlgorithm(a)
		if !ok {
			return gateway.Config{}, fmt.Errorf("sip.digest: unsupported algorithm %q", a)
		}
		reg.Algorithms = append(reg.Algorithms, alg)
	}
	for _, u := range d.Users {
		reg.Users = append(reg.Users, registrar.User{Extension: u.Extension, HA1MD5: u.HA1MD5, HA1SHA256: u.HA1SHA256})
	}
	if d.MSR.Enabled {
		// Other media servers register their resources here with the MSR
		// credentials (docs/design.md §1); a box that takes no part in MSR
		// refuses them like any unknown user.
		user, realm, pw := d.MSR.EffectiveUsername(), reg.Realm, d.MSR.EffectivePassword()
		reg.MSR = &registrar.MSRAccount{HeaderPrefix: d.MSR.EffectiveHeaderPrefix(), User: registrar.User{Extension: user,
			HA1MD5: digest.HA1(digest.MD5, user, realm, pw), HA1SHA256: digest.HA1(digest.SHA256, user, realm, pw)}}
	}
	cfg.Registrar = reg
	for _, u := range d.Users {
		switch u.Voicemail {
		case config.VoicemailLocal:
			cfg.Voicemail.Local = append(cfg.Voicemail.Local, u.Extension)
		case config.VoicemailFallback:
			cfg.Voicemail.Fallback = append(cfg.Voicemail.Fallback, u.Extension)
		}
	}
	if d.HQ.VoicemailPilot != "" {
		cfg.Voicemail.Pilot = d.HQ.VoicemailPilot
		for _, u := range d.Users {
			if u.Voicemail.Pilot() {
				cfg.Voicemail.Users = append(cfg.Voicemail.Users, u.Extension)
			}
		}
		for _, g := range d.Groups {
			if g.Overflow == b2bua.GroupVoicemail {
				cfg.Voicemail.Users = append(cfg.Voicemail.Users, g.Extension) // its overflow
			}
		}
	}
	for _, u := range d.Users {
		if dl := u.Delegates; dl != nil {
			cfg.Calls.Bosses = append(cfg.Calls.Bosses, b2bua.Boss{Extension: u.Extension, Name: u.Name, Delegates: dl.Users,
				After: time.Duration(dl.AfterS) * time.Second, Identity: dl.EffectiveIdentity()})
		}
	}
	for _, g := range d.PickupGroups {
		cfg.Calls.PickupGroups = append(cfg.Calls.PickupGroups, g.Members)
	}
	if p := d.Park; p != nil {
		cfg.Calls.Park = &b2bua.Park{Orbits: p.Orbits(), Timeout: time.Duration(p.EffectiveTimeoutS()) * time.Second, Overflow: p.Overflow}
	}
	for _, g := range d.Groups {
		cfg.Calls.Groups = append(cfg.Calls.Groups, b2bua.Group{Extension: g.Extension, Members: g.Members,
			Strategy: g.EffectiveStrategy(), RingTime: time.Duration(g.EffectiveRingS()) * time.Second,
			TotalTime: time.Duration(g.TotalS) * time.Second, Overflow: g.Overflow, Queue: time.Duration(g.QueueS) * time.Second})
	}
	cfg.Dialplan = dialplanConfig(d)
	cfg.Mode = m
	for i, g := range d.PSTN.Gateways {
		t, err := siptarget.Parse(g.Target, siptarget.Transport(g.EffectiveTransport()))
		if err != nil { // Validate refuses it first
			return gateway.Config{}, config.Errors{{Path: fmt.Sprintf("pstn.gateways[%d].target", i), Message: err.Error()}}
		}
		cfg.PSTN = append(cfg.PSTN, gateway.PSTNGateway{Name: g.Name, Target: t})
	}
	cfg.PSTNProbeInterval = d.PSTN.OptionsInterval()
	cfg.Calls.HQFailover, cfg.Calls.PSTNFailover = failover(d.HQ.Failover), failover(d.PSTN.Failover)
	if b := d.HQ.Backup; b != nil && b.Failover != nil {
		f := failover(*b.Failover)
		cfg.Calls.HQBackupFailover = &f
	}
	cfg.Warning = gateway.SurvivableWarning{Agent: warnAgent(d.Site.Name), Text: d.SIP.SurvivableWarning, Off: d.SIP.SurvivableWarningOff}
	var static []siptarget.Target
	for i, s := range d.HQ.Targets {
		t, err := siptarget.Parse(s, siptarget.Transport(d.HQ.EffectiveTransport()))
		if err != nil {
			return gateway.Config{}, config.Errors{{Path: fmt.Sprintf("hq.targets[%d]", i), Message: err.Error()}}
		}
		static = append(static, t)
		cfg.HQ = append(cfg.HQ, t.String())
	}
	if d.HQ.Domain != "" || len(d.HQ.Targets) > 0 {
		cfg.HQTrunk = &gateway.HQConfig{Domain: d.HQ.Domain, Static: static, Transport: siptarget.Transport(d.HQ.EffectiveTransport()),
			SRVService: d.HQ.SRVService, CAPEM: d.HQ.CAPEM, ClientCertPEM: d.HQ.ClientCertPEM, ClientKeyPEM: d.HQ.ClientKeyPEM,
			DNSServers: d.HQ.DNSServers, DownAfter: d.HQ.EffectiveDownAfter(), UpAfter: d.HQ.EffectiveUpAfter(),
			ProbeInterval: d.HQ.EffectiveOptionsInterval(), CallFallback: d.HQ.EffectiveCallFallback(),
			TrustedNetworks: trustedNetworks(d.HQ.TrustedNetworks)}
		if b := d.HQ.Backup; b != nil {
			pool := &gateway.HQPool{Domain: b.Domain, Transport: siptarget.Transport(b.EffectiveTransport()), SRVService: b.SRVService}
			for i, s := range b.Targets {
				t, err := siptarget.Parse(s, siptarget.Transport(b.EffectiveTransport()))
				if err != nil {
					return gateway.Config{}, config.Errors{{Path: fmt.Sprintf("hq.backup.targets[%d]", i), Message: err.Error()}}
				}
				pool.Static = append(pool.Static, t)
				cfg.HQ = append(cfg.HQ, "backup "+t.String())
			}
			if len(b.Targets) == 0 {
				cfg.HQ = append(cfg.HQ, "backup domain "+b.Domain+" (RFC 3263, "+b.EffectiveTransport()+")")
			}
			cfg.HQTrunk.Backup = pool
		}
	}
	if cfg.HQTrunk != nil && d.HQ.RegisterUpstream {
		cfg.Upstream = &gateway.UpstreamConfig{Domain: d.Site.Domain, Username: d.HQ.AuthUsername, Password: d.HQ.AuthPassword}
	}
	if len(d.HQ.Targets) == 0 && d.HQ.Domain != "" {
		cfg.HQ = append([]string{"domain " + d.HQ.Domain + " (RFC 3263, " + d.HQ.EffectiveTransport() + ")"}, cfg.HQ...)
	}
	cfg.Capture = gateway.Capture{HEPServer: d.Capture.HEPServer, NodeID: uint32(d.Capture.NodeID), Password: d.Capture.Password}
	if p := d.Pool; p != nil {
		pc := &pool.Config{Self: p.Self, Domain: d.Site.Domain, Interval: p.EffectiveOptionsInterval(),
			DownAfter: p.EffectiveDownAfter(), UpAfter: p.EffectiveUpAfter(), Hold: p.EffectiveHold(), Secret: p.Secret}
		for i, m := range p.Members {
			t, err := siptarget.Parse(m.Target, siptarget.UDP)
			if err != nil { // Validate refuses it first
				return gateway.Config{}, config.Errors{{Path: fmt.Sprintf("pool.members[%d].target", i), Message: err.Error()}}
			}
			pc.Members = append(pc.Members, pool.Member{Name: m.Name, Target: t})
		}
		cfg.Pool = pc
	}
	return cfg, nil
}

// failover is a route's failover limits for the B2BUA.
func failover(f config.Failover) b2bua.Failover {
	return b2bua.Failover{AttemptTimeout: f.EffectiveAttemptTimeout(), MaxTargets: f.MaxTargets, Retry5xx: f.Retry5xx}
}

func dialplanConfig(d *config.Document) dialplan.Config {
	c := dialplan.Config{Emergency: d.PSTN.Emergency, HQPSTNPrefix: d.HQ.PSTNPrefix}
	for _, r := range d.Dialplan {
		rule := dialplan.Rule{Name: r.Name, Match: r.Match, Route: dialplan.Route(r.Route), Strip: r.Strip, Prepend: r.Prepend}
		if r.Survivable != nil {
			rule.Survivable = &dialplan.Alt{Route: dialplan.Route(r.Survivable.Route), Strip: r.Survivable.Strip, Prepend: r.Survivable.Prepend}
		}
		c.Rules = append(c.Rules, rule)
	}
	for _, in := range d.Inbound {
		c.Inbound = append(c.Inbound, dialplan.Inbound{Match: in.Match, To: in.To})
	}
	for _, u := range d.Users {
		c.Extensions = append(c.Extensions, u.Extension)
	}
	return c
}

func relayConfig(d *config.Document) relay.Config {
	return relay.Config{PortMin: d.Media.EffectivePortMin(), PortMax: d.Media.EffectivePortMax(),
		Codecs: d.Media.EffectiveCodecs(), InactivityTimeout: d.Media.EffectiveInactivity(),
		SRTP: relay.SRTPPolicy(d.Media.EffectiveSRTP()), MusicOnHold: musicOnHold(d.Media)}
}

// musicOnHold is the recording media.music_on_hold names: its WAV as
// µ-law, the image's (media/moh) when empty, none when "off". A file
// checkMusicOnHold would refuse falls back to the image's.
func musicOnHold(m config.Media) []byte {
	if m.MusicOnHoldOff() {
		return nil
	}
	if wav, err := m.MusicOnHoldWAV(); err == nil && wav != nil {
		if samples, err := moh.ParseWAV(wav); err == nil {
			return samples
		}
	}
	return moh.Default()
}

// checkMusicOnHold reads media.music_on_hold's WAV file, which the config
// package (pure) leaves to the box: a file the relay cannot play refuses
// the document at that field.
func checkMusicOnHold(d *config.Document) config.Errors {
	wav, err := d.Media.MusicOnHoldWAV()
	if err != nil || wav == nil {
		return nil // not base64 is Validate's error
	}
	if _, err := moh.ParseWAV(wav); err != nil {
		return config.Errors{{Path: "media.music_on_hold", Message: "WAV file: " + err.Error()}}
	}
	return nil
}

// anchorPolicyOf is which calls are anchored and each route's and
// interface's SRTP policy (media.srtp, media.srtp_routes,
// media.srtp_interfaces). SRTP other than off anchors every call: only a
// call through the relay can be decrypted or encrypted, and the route is
// known only once the call is anchored.
func anchorPolicyOf(d *config.Document) anchorPolicy {
	p := anchorPolicy{Always: d.Media.Relay, SRTP: relay.SRTPPolicy(d.Media.EffectiveSRTP())}
	for ifname := range d.Media.SRTPInterfaces {
		pol := relay.SRTPPolicy(d.Media.SRTPForInterface(ifname))
		if pol != relay.SRTPOff {
			p.Always = true
		}
		if p.SRTPInterfaces == nil {
			p.SRTPInterfaces = map[string]relay.SRTPPolicy{}
		}
		p.SRTPInterfaces[ifname] = pol
	}
	for _, route := range []string{"local", "hq", "pstn"} {
		pol := relay.SRTPPolicy(d.Media.SRTPFor(route))
		if pol != relay.SRTPOff {
			p.Always = true
		}
		if _, ok := d.Media.SRTPRoutes[route]; ok {
			if p.SRTPRoutes == nil {
				p.SRTPRoutes = map[string]relay.SRTPPolicy{}
			}
			p.SRTPRoutes[route] = pol
		}
	}
	return p
}

// msrName is the MSR name: msr.name, else the box's host name (what an
// operator sees in the softswitch's MSR list and in outpostctl
// media-resources: one name per box, unlike site.name, which several boxes
// of a site may share), else site.name, else "outpost". A host name the
// MSR URI cannot carry is skipped.
func msrName(d *config.Document, hostname string) string {
	if hostname != "" && strings.ContainsAny(hostname, " \t\r\n:@<>\";/?#[]") {
		hostname = ""
	}
	return cmp.Or(d.MSR.Name, hostname, d.Site.Name, "outpost")
}

func msrConfig(d *config.Document, hostname string) msr.Config {
	m := d.MSR
	return msr.Config{Enabled: m.Enabled, Name: msrName(d, hostname), ContactID: m.EffectiveContactID(), Servers: m.Servers,
		ServiceInterface: m.EffectiveServiceInterface(d.WAN), Interfaces: m.EffectiveInterfaces(),
		Username: m.EffectiveUsername(), Password: m.EffectivePassword(),
		RegisterInterval: m.EffectiveRegisterInterval(), RetryInterval: m.EffectiveRetryInterval(),
		ControlPort: m.EffectiveControlPort(), HeaderPrefix: m.EffectiveHeaderPrefix(),
		Zone: d.Site.Zone, Site: d.Site.Site, ControlAllow: m.EffectiveControlAllow()}
}

func selectionPolicy(d *config.Document) selection.Policy {
	mr := d.MediaResources
	p := selection.Policy{Matrix: mr.Matrix, Performance: mr.Performance}
	if len(mr.Inactive) > 0 {
		p.Inactive = map[string]bool{}
		for _, name := range mr.Inactive {
			p.Inactive[name] = true
		}
	}
	if len(mr.Placement) > 0 {
		p.Placement = map[string]selection.Placement{}
		for _, pl := range mr.Placement {
			p.Placement[pl.MSR] = selection.Placement{Zone: pl.Zone, Site: pl.Site}
		}
	}
	return p
}

// listeners turns the listen specs into the gateway's listeners. A spec
// naming an interface ("udp:wan0:5060") or every interface ("udp:*:5060",
// loopback excluded) gives one listener per address the interface has now
// (IPv6 link-local addresses excepted: they need a zone and phones do not
// use them); an interface without an address gives none, until it gets
// one (followAddresses). An address that an explicit spec already binds
// is not bound twice.
func listeners(ls []config.Listen, st netcfg.State) []gateway.Listen {
	var out []gateway.Listen
	have := func(g gateway.Listen) bool { return slices.Contains(out, g) }
	for _, l := range ls {
		if l.Interface == "" {
			if g := (gateway.Listen{Transport: l.Transport, Addr: l.Addr()}); !have(g) {
				out = append(out, g)
			}
		}
	}
	for _, l := range ls {
		if l.Interface == "" {
			continue
		}
		for _, name := range interfacesFor(l.Interface, st) {
			for _, p := range st.AddrsOf(name) {
				a := p.Addr()
				if a.IsLinkLocalUnicast() || a.IsLoopback() {
					continue
				}
				g := gateway.Listen{Transport: l.Transport, Addr: net.JoinHostPort(a.String(), strconv.Itoa(l.Port))}
				if !have(g) {
					out = append(out, g)
				}
			}
		}
	}
	return out
}

func interfacesFor(spec string, st netcfg.State) []string {
	if spec != "*" {
		return []string{spec}
	}
	var names []string
	for _, l := range st.Links {
		if !l.Loopback {
			names = append(names, l.Name)
		}
	}
	slices.Sort(names)
	return names
}

// trustedNetworks parses hq.trusted_networks (Validate has checked them).
func trustedNetworks(cidrs []string) []netip.Prefix {
	var out []netip.Prefix
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(c); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// warnAgent makes the site's name the warn-agent of the survivable Warning
// (RFC 3261 §20.43: a pseudonym is a token): every character outside the
// token set becomes '-'. "" (no name) lets the gateway use its host.
func warnAgent(site string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("-.!%*_+`'~", r):
			return r
		}
		return '-'
	}, site)
}
