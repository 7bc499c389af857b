package msr

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{}.withDefaults()
	if c.Username != "msr" || c.Password != "mediaserver" || c.RegisterInterval != 300*time.Second ||
		c.RetryInterval != 600*time.Second || c.Expires != 600*time.Second || c.ControlPort != 5700 ||
		c.HeaderPrefix != "P-Eltex-MSR-" || c.ContactID != "1" || c.Debounce != 200*time.Millisecond ||
		c.Timeout != 32*time.Second || len(c.Interfaces) != 1 || c.Interfaces[0] != "*" ||
		c.ControlSyncTimeout != 5*time.Second || c.ControlAllow != nil {
		t.Errorf("defaults %+v", c)
	}
	if _, err := c.validate(); err != nil {
		t.Errorf("zero config (disabled) invalid: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := testConfig("ecss.hq.example.com:5060", "198.18.1.2", "[2001:2::5]:5070", "UDP:[2001:2::6]").withDefaults()
	servers, err := ok.validate()
	if err != nil {
		t.Fatal(err)
	}
	want := []server{{"ecss.hq.example.com:5060", "ecss.hq.example.com", 5060}, {"198.18.1.2", "198.18.1.2", 5060},
		{"[2001:2::5]:5070", "2001:2::5", 5070}, {"UDP:[2001:2::6]", "2001:2::6", 5060}}
	for i := range want {
		if servers[i] != want[i] {
			t.Errorf("server %d = %+v, want %+v", i, servers[i], want[i])
		}
	}
	bad := map[string]func(*Config){
		"no name":         func(c *Config) { c.Name = "" },
		"no servers":      func(c *Config) { c.Servers = nil },
		"no service":      func(c *Config) { c.ServiceInterface = "" },
		"bad port":        func(c *Config) { c.Servers = []string{"hq:99999"} },
		"zero port":       func(c *Config) { c.Servers = []string{"hq:0"} },
		"empty host":      func(c *Config) { c.Servers = []string{":5060"} },
		"bare IPv6":       func(c *Config) { c.Servers = []string{"2001:2::6"} },
		"tls server":      func(c *Config) { c.Servers = []string{"tls:hq"} },
		"tcp server":      func(c *Config) { c.Servers = []string{"tcp:hq:5060"} },
		"bad glob":        func(c *Config) { c.Interfaces = []string{"lan["} },
		"control port":    func(c *Config) { c.ControlPort = 70000 },
		"name with @":     func(c *Config) { c.Name = "a@b" },
		"prefix spaces":   func(c *Config) { c.HeaderPrefix = "X MSR-" },
		"contact id with": func(c *Config) { c.ContactID = "1:2" },
		"control allow":   func(c *Config) { c.ControlAllow = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), {}} },
	}
	for name, f := range bad {
		c := ok
		f(&c)
		if _, err := c.validate(); err == nil || !strings.HasPrefix(err.Error(), "media/msr: config:") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}
