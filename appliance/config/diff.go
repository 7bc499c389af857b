package config

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Diff lists what changes from old to new, one line per changed leaf,
// sorted by path: "~ sip.realm: "a" -> "b"", "+ users[1004].name: "Dana"",
// "- dialplan[hq]". Users are keyed by extension and named list entries
// (dial-plan rules, PSTN gateways) by name, so inserting one does not show
// every later entry as changed. Secrets never appear: a changed password,
// HA1 or key shows as "(secret changed)". Both documents should be sealed
// (or both not), so that HA1s compare like with like.
func Diff(old, new *Document) []string {
	a, b := map[string]string{}, map[string]string{}
	flatten("", toTree(old), a)
	flatten("", toTree(new), b)
	var out []string
	for p, v := range a {
		w, ok := b[p]
		switch {
		case !ok:
			out = append(out, "- "+p)
		case v != w && isSecret(p):
			out = append(out, "~ "+p+": (secret changed)")
		case v != w:
			out = append(out, fmt.Sprintf("~ %s: %s -> %s", p, v, w))
		}
	}
	for p, w := range b {
		if _, ok := a[p]; !ok {
			if isSecret(p) {
				w = "(secret)"
			}
			out = append(out, "+ "+p+": "+w)
		}
	}
	slices.SortFunc(out, func(x, y string) int { return strings.Compare(x[2:], y[2:]) })
	return out
}

func toTree(d *Document) any {
	if d == nil {
		return map[string]any{}
	}
	raw, _ := json.Marshal(d)
	var t any
	_ = json.Unmarshal(raw, &t)
	return t
}

// listKeys names the field that identifies an entry of a list.
var listKeys = map[string]string{"users": "extension", "dialplan": "name", "pstn.gateways": "name"}

func flatten(path string, v any, out map[string]string) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			p := k
			if path != "" {
				p = path + "." + k
			}
			flatten(p, e, out)
		}
	case []any:
		key := listKeys[path]
		for i, e := range t {
			id := fmt.Sprint(i)
			if m, ok := e.(map[string]any); ok && key != "" {
				if s, ok := m[key].(string); ok && s != "" {
					id = s
				}
			}
			flatten(fmt.Sprintf("%s[%s]", path, id), e, out)
		}
	default:
		// "<redacted>" in a diff line, not "\u003credacted\u003e".
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(t)
		out[path] = strings.TrimSuffix(b.String(), "\n")
	}
}

func isSecret(path string) bool {
	for _, s := range []string{".password", ".ha1_md5", ".ha1_sha256", "auth_password", "key_pem"} {
		if strings.HasSuffix(path, s) {
			return true
		}
	}
	return false
}
