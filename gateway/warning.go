package gateway

import (
	"fmt"
	"net"
	"strings"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/mode"
)

// SurvivableWarning tells phones that the box runs in survivable mode: a
// Warning header (RFC 3261 §20.43) on the box's final answers to REGISTER
// and INVITE while the mode is survivable, e.g.
//
//	Warning: 399 branch-17 "Survivable mode: limited service"
//
// 399 is "Miscellaneous warning": the text is for the user (phones show it
// or log it) and changes nothing in the protocol. The zero value is on,
// with DefaultWarningText and the first listener's host as warn-agent.
type SurvivableWarning struct {
	// Agent is the warn-agent: a pseudonym (an RFC 3261 token) or
	// host[:port]; "" = the host of the first configured listener (or
	// "outpost" when that is a wildcard). The appliance sets the site's
	// name, made a token (sip.survivable_warning in the document).
	Agent string
	// Text is the warn-text; "" = DefaultWarningText. Quotes and
	// backslashes are escaped; control characters are refused by the
	// document's validation.
	Text string
	// Off disables the header (sip.survivable_warning_off).
	Off bool
}

// DefaultWarningText is the warn-text when SurvivableWarning.Text is empty.
const DefaultWarningText = "Survivable mode: limited service"

// warning is the Warning header value due in mode m under r: "" in any
// mode but survivable, or when disabled. It is worked out per response,
// so a mode change (SetMode) or a push applies to the next answer.
func (r *running) warning(m mode.Mode) string {
	if m != mode.Survivable || r.cfg.Warning.Off {
		return ""
	}
	text := r.cfg.Warning.Text
	if text == "" {
		text = DefaultWarningText
	}
	return r.warningValue(text)
}

// warningValue is a 399 Warning of this box with text.
func (r *running) warningValue(text string) string {
	cfg := r.cfg
	agent := cfg.Warning.Agent
	if agent == "" {
		agent = "outpost"
		if len(cfg.Listen) > 0 {
			if host, _, err := net.SplitHostPort(cfg.Listen[0].Addr); err == nil {
				if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
					agent = host
					if ip.To4() == nil {
						agent = "[" + host + "]"
					}
				}
			}
		}
	}
	// RFC 3261 §25.1: quoted-string; escape what would end it.
	text = strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(text)
	return "399 " + agent + ` "` + text + `"`
}

// backupWarning is the Warning of a pool member's 2xx to a REGISTER of a
// user it serves as backup (its first member is another one), in any
// mode: the phone shows that its home registrar is out of service. "" =
// none due.
func (r *running) backupWarning(res *sip.Response) string {
	p := r.pool
	if p == nil || r.cfg.Warning.Off || res.StatusCode/100 != 2 || res.Contact() == nil {
		return "" // no pool, off, or no binding left (a de-registration)
	}
	to := res.To()
	if to == nil {
		return ""
	}
	if msr := r.cfg.Registrar.MSR; msr != nil && to.Address.User == msr.User.Extension {
		return "" // the media servers' account is not a pool user
	}
	home := p.Order(to.Address.User)[0].Name
	if self := p.Self().Name; home != self {
		return r.warningValue(fmt.Sprintf(BackupWarningText, self, home))
	}
	return ""
}

// BackupWarningText is the warn-text of backupWarning: this member's and
// the user's home member's names.
const BackupWarningText = "Backup registrar %s: home registrar %s out of service"

// warn adds the survivable Warning to a final response to REGISTER or
// INVITE (other methods and provisional responses are left alone), and to
// a REGISTER's 2xx the backup Warning.
func (r *running) warn(res *sip.Response, m mode.Mode) {
	if res.StatusCode < 200 {
		return
	}
	cs := res.CSeq()
	if cs == nil || cs.MethodName != sip.REGISTER && cs.MethodName != sip.INVITE {
		return
	}
	if w := r.warning(m); w != "" {
		res.AppendHeader(sip.NewHeader("Warning", w))
	}
	if cs.MethodName == sip.REGISTER {
		if w := r.backupWarning(res); w != "" {
			res.AppendHeader(sip.NewHeader("Warning", w))
		}
	}
}
