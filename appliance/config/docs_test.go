package config_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/outpost/outpost/appliance/config"
	"github.com/outpost/outpost/appliance/config/internal/docgen"
)

const regenerate = "run go generate ./appliance/config/..."

func model(t *testing.T) *docgen.Model {
	t.Helper()
	m, err := docgen.Load(".")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFieldsDocumented walks the document's types with reflect: every
// field must have a doc comment, a FieldRules entry and an example.
func TestFieldsDocumented(t *testing.T) {
	m := model(t)
	byGo := map[string]*docgen.Field{}
	for _, f := range m.All() {
		byGo[f.GoName] = f
	}
	// n counts fields per place in the document (a struct used in two
	// places, such as Failover, counts twice, as docgen's paths do);
	// each Go field is checked once.
	n := 0
	checked := map[string]bool{}
	var walk func(reflect.Type)
	walk = func(st reflect.Type) {
		for sf := range st.Fields() {
			if !sf.IsExported() || sf.Tag.Get("json") == "-" {
				continue
			}
			n++
			name := st.Name() + "." + sf.Name
			f := byGo[name]
			switch {
			case checked[name]:
			case f == nil:
				t.Errorf("%s: docgen does not know the field", name)
			case f.Doc == "":
				t.Errorf("%s (%s): no doc comment; write one on the field in appliance/config", name, f.Path)
			}
			checked[name] = true
			ft := sf.Type
			for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				walk(ft)
			}
		}
	}
	walk(reflect.TypeFor[config.Document]())
	if n != len(m.All()) {
		t.Errorf("reflect finds %d fields, docgen %d", n, len(m.All()))
	}
	for _, p := range m.Problems() {
		t.Error(p)
	}
}

// TestGeneratedFresh regenerates the reference and the schema in memory
// and compares them with the committed files.
func TestGeneratedFresh(t *testing.T) {
	ref, schema, err := docgen.Generate(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		want []byte
	}{{docgen.ReferencePath, ref}, {docgen.SchemaPath, schema}} {
		got, err := os.ReadFile(f.path)
		if err != nil {
			t.Errorf("%v: %s", err, regenerate)
			continue
		}
		if !bytes.Equal(got, f.want) {
			t.Errorf("%s is stale (differs from what the config package generates): %s", filepath.Clean(f.path), regenerate)
		}
	}
}

// TestDefaultsAreAccessors: each rule's Default reads its own field (set
// to the example, the accessor returns the example), and the example
// differs from the default so that this shows something.
func TestDefaultsAreAccessors(t *testing.T) {
	for _, f := range model(t).All() {
		for _, r := range []*config.FieldRule{f.Rule, f.Rule.Values} {
			if r == nil || r.Default == nil {
				continue
			}
			path, ex := f.Path, f.Example
			if r == f.Rule.Values { // a map's value: the entry "" holds the example
				m := ex.(map[string]any)
				for _, v := range m {
					ex = v
				}
				ex = map[string]any{"": ex}
			}
			zero, _, err := docgen.DefaultOf(f, r)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			d, err := docgen.Skeleton(path, ex, true)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			want := ex
			if r == f.Rule.Values {
				want = ex.(map[string]any)[""]
			}
			if got := r.Default(d); norm(got) != norm(want) {
				t.Errorf("%s: set to %s, its Default gives %s: it reads another field", path, norm(want), norm(got))
			}
			if norm(zero) == norm(want) {
				t.Errorf("%s: the example equals the default %s; choose another example", path, norm(zero))
			}
		}
	}
}

func norm(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		panic(err)
	}
	b, _ = json.Marshal(x)
	return string(b)
}

func compileSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(docgen.SchemaPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("outpost-config.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("outpost-config.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// validate checks JSON text against the schema; a document that is not
// JSON is an error too.
func validate(s *jsonschema.Schema, data []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

func validDocs(t *testing.T) []string {
	var files []string
	for _, g := range []string{"../../examples/*.json", "default.json", "testdata/valid/*.json"} {
		m, err := filepath.Glob(g)
		if err != nil || len(m) == 0 {
			t.Fatalf("%s: no documents (%v)", g, err)
		}
		files = append(files, m...)
	}
	return files
}

// TestSchemaAcceptsValid: every example and valid golden document passes
// the schema (and the box).
func TestSchemaAcceptsValid(t *testing.T) {
	s := compileSchema(t)
	for _, f := range validDocs(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := config.Load(data); err != nil {
			t.Errorf("%s: the box refuses it: %v", f, err)
		}
		if err := validate(s, data); err != nil {
			t.Errorf("%s: the schema refuses a valid document: %v", f, err)
		}
	}
}

// schemaBlind are the invalid golden documents whose every problem is a
// rule across fields, or a value check (a certificate, a regexp, a host
// name, a CIDR) no schema keyword expresses: the schema accepts them and
// only the box refuses them. Every other invalid golden document must be
// refused by the schema.
var schemaBlind = map[string]string{
	"dialplan_no_gateway":          "route pstn without pstn.gateways",
	"expires_default_max":          "min_expires above the default max_expires",
	"expires_order":                "max_expires below min_expires",
	"hq_tls_mismatch":              "key not the certificate's",
	"listen_iface":                 "listen specs that bind the same port",
	"management_access_without_ca": "allowed_clients without client_ca_pem",
	"management_bad_pem":           "PEM contents",
	"management_ca_without_cert":   "client_ca_pem without cert_pem",
	"management_mismatch":          "key not the certificate's",
	"management_no_cert":           "key_pem without cert_pem",
	"management_no_key":            "cert_pem without key_pem",
	"management_trailing":          "data after the PEM block",
	"media_range_empty":            "port_min not below port_max",
	"media_resources_no_site":      "matrix without site.site",
	"msr_enabled_empty":            "enabled without servers and interface",
	"pool_self":                    "pool.self not among the members",
	"ports":                        "ports shared between sections",
	"ports_msr_management":         "msr.control_port equal to management's port",
	"status":                       "status.listen without an admin user",
	"capture_bad_port":             "host:port checks",
	"status_listen":                "host:port checks",
	"wan":                          "interface name checks",
}

// TestSchemaRefusesInvalid runs every invalid golden document through the
// schema: refused unless listed in schemaBlind, and then accepted by the
// schema (the list is exact) and refused by the box.
func TestSchemaRefusesInvalid(t *testing.T) {
	s := compileSchema(t)
	files, err := filepath.Glob("testdata/invalid/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no invalid documents: %v", err)
	}
	listed := map[string]bool{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		serr := validate(s, data)
		_, blind := schemaBlind[name]
		listed[name] = blind
		switch {
		case !blind && serr == nil:
			t.Errorf("%s: the schema accepts it (add its problem to the schema, or list it in schemaBlind)", name)
		case blind && serr != nil:
			t.Errorf("%s: listed in schemaBlind, but the schema refuses it: %v", name, serr)
		case blind:
			if _, err := config.Load(data); err == nil {
				t.Errorf("%s: the box accepts it", name)
			}
		}
	}
	for name := range schemaBlind {
		if _, ok := listed[name]; !ok {
			t.Errorf("schemaBlind lists %s, which is no invalid golden document", name)
		}
	}
}

// TestSchemaBounds tries both sides of every bound, enum and required
// field of FieldRules in the box and in the schema, each time on a valid
// golden document that has the field's parent: the two must agree.
func TestSchemaBounds(t *testing.T) {
	s := compileSchema(t)
	var bases [][]byte
	for _, f := range validDocs(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		bases = append(bases, data)
	}
	checked := 0
	// try sets the field to v (del: removes it) in the first base that has
	// its parent; ok says whether the box and the schema should accept it.
	try := func(f *docgen.Field, item bool, v any, del, ok bool) {
		t.Helper()
		segs := strings.Split(f.Path, ".")
		for _, base := range bases {
			var doc any
			if err := json.Unmarshal(base, &doc); err != nil {
				t.Fatal(err)
			}
			val := v
			if item {
				val = []any{v}
			}
			p, found := set(doc, segs, "", val, del)
			if !found {
				continue
			}
			if item {
				p += "[0]"
			}
			checked++
			data, _ := json.Marshal(doc)
			serr := validate(s, data)
			_, lerr := config.Load(data)
			var at []string
			var errs config.Errors
			if errors.As(lerr, &errs) {
				for _, fe := range errs {
					if fe.Path == p || strings.HasPrefix(fe.Path, p+".") || strings.HasPrefix(fe.Path, p+"[") {
						at = append(at, fe.Error())
					}
				}
			}
			what := fmt.Sprintf("%s = %s", p, norm(v))
			if reason, ok := crossField[what]; ok {
				if serr != nil {
					t.Errorf("%s: the schema refuses it: %v", what, serr)
				}
				if lerr == nil {
					t.Errorf("%s: listed in crossField (%s), but the box accepts it", what, reason)
				}
				return
			}
			if del {
				what = p + " absent"
			}
			switch {
			case ok && serr != nil:
				t.Errorf("%s: the schema refuses it: %v", what, serr)
			case ok && len(at) > 0:
				t.Errorf("%s: the box refuses it: %v", what, at)
			case !ok && serr == nil:
				t.Errorf("%s: the schema accepts it", what)
			case !ok && del && lerr == nil:
				t.Errorf("%s: the box accepts it", what)
			case !ok && !del && len(at) == 0:
				t.Errorf("%s: the box accepts it (%v)", what, lerr)
			}
			return
		}
		t.Errorf("%s: no valid golden document has its parent", f.Path)
	}
	for _, f := range model(t).All() {
		r := f.Rule
		if r.Required {
			try(f, false, nil, true, false)
		}
		item := false
		if r.Items != nil {
			r, item = r.Items, true
		}
		for _, e := range r.Enum {
			try(f, item, e, false, true)
		}
		if len(r.Enum) > 0 {
			try(f, item, "bogus", false, false)
		}
		step := 1.0
		if r.MultipleOf != 0 {
			step = float64(r.MultipleOf)
			if lo := bound(r.Min, 0); lo+1 != 0 {
				try(f, item, lo+1, false, false) // not a multiple
			}
		}
		if r.Min != nil {
			lo := math.Ceil(*r.Min/step) * step
			if r.ExclusiveMin {
				try(f, item, *r.Min, false, false)
			} else {
				try(f, item, lo, false, true)
				if below := *r.Min - 1; below != 0 || !r.ZeroOK {
					try(f, item, below, false, false)
				}
			}
		}
		if r.Max != nil {
			try(f, item, math.Floor(*r.Max/step)*step, false, true)
			try(f, item, *r.Max+1, false, false)
		}
		if r.ZeroOK {
			try(f, item, 0, false, true)
		}
	}
	if checked < 100 {
		t.Errorf("only %d cases checked", checked)
	}
}

// crossField are the boundary values TestSchemaBounds tries that the box
// refuses for a rule across fields on its base document.
var crossField = map[string]string{
	"media.port_max = 1024": "not above media.port_min",
}

func bound(p *float64, def float64) float64 {
	if p == nil {
		return def
	}
	return *p
}

// set puts v at the path segs (arrays as "name[]": the first element that
// has the rest of the path) or deletes it; path is the concrete JSON path
// reached so far. found is false when the parent is missing.
func set(doc any, segs []string, path string, v any, del bool) (string, bool) {
	m, ok := doc.(map[string]any)
	if !ok {
		return "", false
	}
	name, arr := strings.CutSuffix(segs[0], "[]")
	p := name
	if path != "" {
		p = path + "." + name
	}
	if len(segs) == 1 {
		if del {
			delete(m, name)
		} else {
			m[name] = v
		}
		return p, true
	}
	if !arr {
		return set(m[name], segs[1:], p, v, del)
	}
	l, _ := m[name].([]any)
	for i, e := range l {
		if p, ok := set(e, segs[1:], fmt.Sprintf("%s[%d]", p, i), v, del); ok {
			return p, true
		}
	}
	return "", false
}

// TestListenPattern: the schema's listen pattern admits every spec the
// parser does (it states a part of the grammar, never more).
func TestListenPattern(t *testing.T) {
	s := compileSchema(t)
	base, err := os.ReadFile("testdata/valid/minimal.json")
	if err != nil {
		t.Fatal(err)
	}
	var specs []string
	for _, tr := range []string{"udp", "tcp", "tls", "UDP", "Tcp", "sip", "", "udp6"} {
		for _, host := range []string{"0.0.0.0", "[::1]", "127.0.0.1:5070", "[::]:0", "wan0", "*", "*:5062", "eth0.100:5060"} {
			specs = append(specs, tr+":"+host)
		}
	}
	specs = append(specs, "127.0.0.1:5060", "udp", "udp:", "tcp:[::1")
	accepted := 0
	for _, spec := range specs {
		var doc map[string]any
		if err := json.Unmarshal(base, &doc); err != nil {
			t.Fatal(err)
		}
		doc["sip"].(map[string]any)["listen"] = []any{spec}
		data, _ := json.Marshal(doc)
		_, perr := config.ParseListen(spec)
		serr := validate(s, data)
		if perr == nil {
			accepted++
			if serr != nil {
				t.Errorf("%q: ParseListen accepts it, the schema refuses it: %v", spec, serr)
			}
		}
		if serr == nil && perr != nil && !slices.Contains([]string{"udp", "tcp", "tls"}, strings.SplitN(spec, ":", 2)[0]) {
			t.Errorf("%q: the schema accepts a transport ParseListen refuses", spec)
		}
	}
	if accepted == 0 {
		t.Error("no spec accepted")
	}
}
