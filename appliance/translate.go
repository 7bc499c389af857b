package appliance

import (
	"fmt"

	"github.com/outpost/outpost/appliance/config"
	"github.com/outpost/outpost/gateway"
	"github.com/outpost/outpost/gateway/digest"
	"github.com/outpost/outpost/gateway/registrar"
)

// gatewayConfig is the gateway's section of a (validated, sealed) document.
func gatewayConfig(d *config.Document, build string) (gateway.Config, error) {
	ls, err := d.SIP.Listeners()
	if err != nil {
		return gateway.Config{}, config.Errors{{Path: "sip.listen", Message: err.Error()}}
	}
	cfg := gateway.Config{ServerName: "outpost/" + build}
	for _, l := range ls {
		cfg.Listen = append(cfg.Listen, gateway.Listen{Transport: l.Transport, Addr: l.Addr()})
	}
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
	cfg.Registrar = reg
	return cfg, nil
}
