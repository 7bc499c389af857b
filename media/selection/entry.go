package selection

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// DefaultHeaderPrefix is the prefix of the MSR headers (ECSS-10's).
const DefaultHeaderPrefix = "P-Eltex-MSR-"

// Header names, without the prefix.
const (
	HdrName      = "Name"       // MSR name (identifies an MSR REGISTER)
	HdrIfaceName = "Iface-Name" // announced interface name (identifies an MSR REGISTER)
	HdrIfaceAddr = "Iface-Addr" // its media address
	HdrAccID     = "Acc-Id"     // the MSR's contact/account id
	HdrCCAddr    = "CC-Addr"    // control channel address (service UA only)
	HdrCCPort    = "CC-Port"    // control channel TCP port (service UA only)
	HdrLoad      = "Load"       // load of the box (CPU or relay packet rate), integer percent
	HdrZone      = "Zone"       // media zone of the MSR (optional)
	HdrSite      = "Site"       // media site of the MSR (optional)
)

// Errors of ParseRegister.
var (
	// ErrNotMSR: the REGISTER carries neither {prefix}Name nor
	// {prefix}Iface-Name; it is an ordinary registration.
	ErrNotMSR = errors.New("media/selection: not an MSR REGISTER")
	// ErrMalformed: an MSR REGISTER with a missing or unreadable field.
	ErrMalformed = errors.New("media/selection: malformed MSR REGISTER")
)

// Key identifies a media resource: one interface of one MSR.
type Key struct {
	MSR       string
	Interface string
}

// Entry is one media resource.
type Entry struct {
	MSR       string // MSR name
	AccID     string // {prefix}Acc-Id
	Interface string // interface name as announced
	Addr      netip.Addr
	// Contact is the registered Contact URI (where the MSR UA is reached).
	Contact string
	Zone    string
	Site    string
	// Load is the box's load in percent (CPU, or relay packets/s against
	// its capacity, whichever is higher), clamped to 0..100.
	Load int
	// Coefficient is the performance coefficient; 0 means the policy's
	// for this MSR (default 1). Table fills it from its Policy.
	Coefficient float64
	// Registered is the status: the registration is current.
	Registered bool
	// Active is the administrative flag (Table.SetActive).
	Active bool
	// Expires is when the registration lapses; zero = never (local
	// resources).
	Expires time.Time
	// Control is the control-channel address (service UA only).
	Control netip.AddrPort
}

// Key returns e's key.
func (e Entry) Key() Key { return Key{MSR: e.MSR, Interface: e.Interface} }

// Announced returns the interface as the MSR announces it:
// interface-name(MEDIA-IP).
func (e Entry) Announced() string { return e.Interface + "(" + e.Addr.String() + ")" }

// IsMSRRegister reports whether a REGISTER's headers mark it as an MSR
// registration: {prefix}Name or {prefix}Iface-Name is present. Header
// names are compared case-insensitively. prefix "" means
// DefaultHeaderPrefix.
func IsMSRRegister(prefix string, headers map[string]string) bool {
	_, a := lookup(headers, prefixOr(prefix)+HdrName)
	_, b := lookup(headers, prefixOr(prefix)+HdrIfaceName)
	return a || b
}

// ParseRegister turns the headers of an MSR REGISTER (name → value, names
// case-insensitive), its Contact URI and the expiry the registrar granted
// (seconds; 0 = unREGISTER) into an Entry, Registered and Active, expiring
// at now + expires. An Entry whose Expires is not after now removes the
// resource when passed to Table.Upsert.
//
// Required: {prefix}Name, {prefix}Iface-Name and the media address, from
// {prefix}Iface-Addr or from an Iface-Name written interface-name(IP).
// Optional: Acc-Id, Load (missing = 0), Zone, Site, and CC-Addr with
// CC-Port (both or neither). It returns ErrNotMSR when neither Name nor
// Iface-Name is present, and an error wrapping ErrMalformed otherwise.
func ParseRegister(prefix string, headers map[string]string, contact string, expires int, now time.Time) (Entry, error) {
	p := prefixOr(prefix)
	get := func(n string) (string, bool) {
		v, ok := lookup(headers, p+n)
		return strings.TrimSpace(v), ok
	}
	name, hasName := get(HdrName)
	iface, hasIface := get(HdrIfaceName)
	if !hasName && !hasIface {
		return Entry{}, ErrNotMSR
	}
	bad := func(format string, a ...any) (Entry, error) {
		return Entry{}, fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, a...)...)
	}
	if name == "" {
		return bad("%s%s missing", p, HdrName)
	}
	if iface == "" {
		return bad("%s%s missing", p, HdrIfaceName)
	}
	if expires < 0 {
		return bad("negative expires %d", expires)
	}
	e := Entry{
		MSR:        name,
		Contact:    strings.TrimSpace(contact),
		Registered: true,
		Active:     true,
		Expires:    now.Add(time.Duration(expires) * time.Second),
	}
	// interface-name(MEDIA-IP) is accepted in Iface-Name too.
	var inName netip.Addr
	if i := strings.IndexByte(iface, '('); i > 0 && strings.HasSuffix(iface, ")") {
		a, err := netip.ParseAddr(iface[i+1 : len(iface)-1])
		if err != nil {
			return bad("%s%s %q: %v", p, HdrIfaceName, iface, err)
		}
		iface, inName = iface[:i], a
	}
	e.Interface = iface
	if v, ok := get(HdrIfaceAddr); ok {
		a, err := netip.ParseAddr(v)
		if err != nil {
			return bad("%s%s %q: %v", p, HdrIfaceAddr, v, err)
		}
		e.Addr = a.Unmap()
	} else if inName.IsValid() {
		e.Addr = inName.Unmap()
	} else {
		return bad("%s%s missing", p, HdrIfaceAddr)
	}
	e.AccID, _ = get(HdrAccID)
	e.Zone, _ = get(HdrZone)
	e.Site, _ = get(HdrSite)
	if v, ok := get(HdrLoad); ok && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return bad("%s%s %q: %v", p, HdrLoad, v, err)
		}
		e.Load = clampLoad(n)
	}
	ccAddr, hasCCAddr := get(HdrCCAddr)
	ccPort, hasCCPort := get(HdrCCPort)
	switch {
	case hasCCAddr && hasCCPort:
		a, err := netip.ParseAddr(ccAddr)
		if err != nil {
			return bad("%s%s %q: %v", p, HdrCCAddr, ccAddr, err)
		}
		port, err := strconv.ParseUint(ccPort, 10, 16)
		if err != nil || port == 0 {
			return bad("%s%s %q: not a port", p, HdrCCPort, ccPort)
		}
		e.Control = netip.AddrPortFrom(a.Unmap(), uint16(port))
	case hasCCAddr || hasCCPort:
		return bad("%s%s and %s%s go together", p, HdrCCAddr, p, HdrCCPort)
	}
	return e, nil
}

func prefixOr(p string) string {
	if p == "" {
		return DefaultHeaderPrefix
	}
	return p
}

// lookup finds a header case-insensitively (exact match first: the
// registrar usually passes canonical names).
func lookup(h map[string]string, name string) (string, bool) {
	if v, ok := h[name]; ok {
		return v, true
	}
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

func clampLoad(n int) int { return min(max(n, 0), 100) }
