package appliance

import (
	"fmt"

	"github.com/outpost/outpost/appliance/config"
	"github.com/outpost/outpost/gateway"
	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/gateway/digest"
	"github.com/outpost/outpost/gateway/registrar"
	"github.com/outpost/outpost/netcfg"
	"github.com/outpost/outpost/siptarget"
)

// gatewayConfig is the gateway's section of a (validated, sealed) document.
// Listen specs that name interfaces become one listener per address the
// interface has in st.
func gatewayConfig(d *config.Document, build string, m dialplan.Mode, st netcfg.State) (gateway.Config, error) {
	ls, err := d.SIP.Listeners()
	if err != nil {
		return gateway.Config{}, config.Errors{{Path: "sip.listen", Message: err.Error()}}
	}
	cfg := gateway.Config{ServerName: "outpost/" + build, Listen: listeners(ls, st)}
	algs := d.SIP.DigestAlgorithms()
	reg := registrar.Config{
		Realm:           d.SIP.EffectiveRealm(d.Site),
		MinExpires:      d.SIP.MinExpires(),
		MaxExpires:      d.SIP.MaxExpires(),
		AuthFailLimit:   d.SIP.Registrar.EffectiveAuthFailLimit(),
		StormRate:       d.SIP.Registrar.EffectiveStormRate(),
		RetryAfter:      d.SIP.Registrar.EffectiveRetryAfter(),
		PersistInterval: d.SIP.Registrar.EffectivePersistInterval(),
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
		// credentials (DESIGN §1); a box that takes no part in MSR
		// refuses them like any unknown user.
		user, realm, pw := d.MSR.EffectiveUsername(), reg.Realm, d.MSR.EffectivePassword()
		reg.MSR = &registrar.MSRAccount{HeaderPrefix: d.MSR.EffectiveHeaderPrefix(), User: registrar.User{Extension: user,
			HA1MD5: digest.HA1(digest.MD5, user, realm, pw), HA1SHA256: digest.HA1(digest.SHA256, user, realm, pw)}}
	}
	cfg.Registrar = reg
	if d.HQ.VoicemailPilot != "" {
		cfg.Voicemail.Pilot = d.HQ.VoicemailPilot
		for _, u := range d.Users {
			if u.Voicemail {
				cfg.Voicemail.Users = append(cfg.Voicemail.Users, u.Extension)
			}
		}
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
			DNSServers: d.HQ.DNSServers, DownAfter: d.HQ.EffectiveDownAfter(), UpAfter: d.HQ.EffectiveUpAfter(),
			ProbeInterval: d.HQ.EffectiveOptionsInterval()}
	}
	if cfg.HQTrunk != nil && d.HQ.RegisterUpstream {
		cfg.Upstream = &gateway.UpstreamConfig{Domain: d.Site.Domain, Username: d.HQ.AuthUsername, Password: d.HQ.AuthPassword}
	}
	if len(cfg.HQ) == 0 && d.HQ.Domain != "" {
		cfg.HQ = []string{"domain " + d.HQ.Domain + " (RFC 3263, " + d.HQ.EffectiveTransport() + ")"}
	}
	return cfg, nil
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
