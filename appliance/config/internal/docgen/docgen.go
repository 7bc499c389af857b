// Package docgen makes the configuration reference and the JSON Schema of
// the document from one source: the Go types of package config (their
// fields, JSON names and doc comments, read from the package's source) and
// config.FieldRules (defaults through the accessors the parts use, ranges,
// enums, examples). cmd/docgen writes the two files; the config package's
// tests regenerate them in memory and compare.
package docgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/outpost/outpost/appliance/config"
)

// Output paths, relative to the config package's directory.
const (
	ReferencePath = "../../docs/config-reference.md"
	SchemaPath    = "../../docs/schema/outpost-config.schema.json"
)

// exampleDocs are searched, in order, for an example of a field whose rule
// has none (relative to the config package's directory).
var exampleDocs = []string{"testdata/valid/full.json", "../../examples/branch.json", "testdata/valid/pool.json", "testdata/valid/hq_tls.json"}

// Field is one field of the document.
type Field struct {
	Name   string       // JSON name
	Path   string       // JSON path for people, arrays as []: "users[].extension"
	Key    string       // the FieldRules key: "users.extension"
	GoName string       // "User.Extension"
	Type   reflect.Type // the Go type as declared
	Doc    string       // doc text, "" when missing
	Rule   *config.FieldRule
	// Example is the rule's example or the value found in exampleDocs.
	Example  any
	Children []*Field // the fields of a struct, or of an array's struct elements
}

// Model is the document's fields with their documentation.
type Model struct {
	Fields   []*Field // the document's top-level fields, in order
	problems []string
}

// Load reads the doc comments of the config package in dir and walks the
// document type.
func Load(dir string) (*Model, error) {
	typeDocs, fieldDocs, err := parseDocs(dir)
	if err != nil {
		return nil, err
	}
	var examples []any
	for _, p := range exampleDocs {
		data, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			return nil, err
		}
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, fmt.Errorf("%s: %v", p, err)
		}
		examples = append(examples, v)
	}
	m := &Model{}
	rules := config.FieldRules()
	used := map[string]bool{}
	var walk func(t reflect.Type, path, key string) []*Field
	walk = func(t reflect.Type, path, key string) []*Field {
		var out []*Field
		for sf := range t.Fields() {
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if !sf.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			f := &Field{Name: name, Path: join(path, name), Key: join(key, name), GoName: t.Name() + "." + sf.Name, Type: sf.Type}
			f.Doc = fieldDocs[f.GoName]
			st := structOf(sf.Type)
			if f.Doc == "" && st != nil {
				f.Doc = typeDocs[st.Name()]
			}
			f.Doc = jsonNames(f.Doc, sf.Name, name)
			if st != nil {
				f.Doc = jsonNames(f.Doc, st.Name(), name)
			}
			if f.Doc == "" {
				m.problems = append(m.problems, fmt.Sprintf("%s (%s) has no doc comment", f.GoName, f.Path))
			}
			f.Rule = rules[f.Key]
			used[f.Key] = true
			if f.Rule == nil {
				m.problems = append(m.problems, fmt.Sprintf("%s (%s) has no entry in config.FieldRules", f.GoName, f.Path))
				f.Rule = &config.FieldRule{}
			}
			if st != nil {
				childPath := f.Path
				if sf.Type.Kind() == reflect.Slice {
					childPath += "[]"
				}
				f.Children = walk(st, childPath, f.Key)
			} else {
				f.Example = f.Rule.Example
				for _, doc := range examples {
					if f.Example != nil {
						break
					}
					f.Example, _ = lookup(doc, strings.Split(f.Key, "."))
				}
				if f.Example == nil {
					m.problems = append(m.problems, fmt.Sprintf("%s (%s) has no example", f.GoName, f.Path))
				}
			}
			out = append(out, f)
		}
		return out
	}
	m.Fields = walk(reflect.TypeFor[config.Document](), "", "")
	for _, k := range slices.Sorted(maps.Keys(rules)) {
		if !used[k] {
			m.problems = append(m.problems, fmt.Sprintf("config.FieldRules has %q, which is no field of the document", k))
		}
	}
	return m, nil
}

// Problems lists what keeps the sources from describing every field:
// missing doc comments, rules or examples.
func (m *Model) Problems() []string { return m.problems }

// All returns every field, depth first in document order.
func (m *Model) All() []*Field {
	var out []*Field
	var rec func([]*Field)
	rec = func(fs []*Field) {
		for _, f := range fs {
			out = append(out, f)
			rec(f.Children)
		}
	}
	rec(m.Fields)
	return out
}

// Generate returns the reference and the schema for the package in dir.
func Generate(dir string) (reference, schema []byte, err error) {
	m, err := Load(dir)
	if err != nil {
		return nil, nil, err
	}
	if p := m.Problems(); len(p) > 0 {
		return nil, nil, fmt.Errorf("the config package does not describe every field:\n\t%s", strings.Join(p, "\n\t"))
	}
	schema, err = m.Schema()
	if err != nil {
		return nil, nil, err
	}
	return m.Reference(), schema, nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// structOf is the struct type t is, points to, or holds in a slice; nil
// for other types.
func structOf(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct {
		return t
	}
	return nil
}

// lookup finds the value at the path segs in a decoded JSON document; in
// an array it takes the first element that has the rest of the path.
func lookup(v any, segs []string) (any, bool) {
	if len(segs) == 0 {
		return v, v != nil
	}
	switch v := v.(type) {
	case map[string]any:
		return lookup(v[segs[0]], segs[1:])
	case []any:
		for _, e := range v {
			if r, ok := lookup(e, segs); ok {
				return r, true
			}
		}
	}
	return nil, false
}

// parseDocs reads the doc comments of the struct types in dir's Go files
// (tests excluded): type name → doc, "Type.Field" → doc (the comment above
// the field, else the one after it on its line).
func parseDocs(dir string) (types, fields map[string]string, err error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, nil, err
	}
	types, fields = map[string]string{}, map[string]string{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, nil, err
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				types[ts.Name.Name] = text(doc)
				for _, fl := range st.Fields.List {
					d := text(fl.Doc)
					if d == "" {
						d = text(fl.Comment)
					}
					for _, n := range fl.Names {
						fields[ts.Name.Name+"."+n.Name] = d
					}
				}
			}
		}
	}
	return types, fields, nil
}

// text is a comment as paragraphs, each on one line.
func text(cg *ast.CommentGroup) string {
	if cg == nil {
		return ""
	}
	var paras []string
	for p := range strings.SplitSeq(strings.TrimSpace(cg.Text()), "\n\n") {
		p = strings.Join(strings.Fields(p), " ")
		if r, n := utf8.DecodeRuneInString(p); unicode.IsLower(r) {
			p = string(unicode.ToUpper(r)) + p[n:]
		}
		if !strings.HasSuffix(p, ".") && !strings.HasSuffix(p, ":") {
			p += "."
		}
		paras = append(paras, p)
	}
	return strings.Join(paras, "\n\n")
}

// jsonNames writes a doc that begins with the Go field name with the JSON
// name instead ("MinExpiresS is" → "`min_expires` is").
func jsonNames(doc, goName, jsonName string) string {
	if rest, ok := strings.CutPrefix(doc, goName+" "); ok {
		return "`" + jsonName + "` " + rest
	}
	return doc
}

// marshal is compact JSON without HTML escapes.
func marshal(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// DefaultOf is the value rule.Default gives for f, computed on a document
// in which f is absent and every array on its path has one element (so
// that an accessor of an element, like a gateway's transport, has one to
// read); ok is false without a Default.
func DefaultOf(f *Field, rule *config.FieldRule) (v any, ok bool, err error) {
	if rule.Default == nil {
		return nil, false, nil
	}
	d, err := Skeleton(f.Path, nil, false)
	if err != nil {
		return nil, false, err
	}
	return rule.Default(d), true, nil
}

// Skeleton parses the smallest document that holds the parent objects of
// the field at path (arrays as [], given one element), with the field set
// to value when set is true.
func Skeleton(path string, value any, set bool) (*config.Document, error) {
	segs := strings.Split(path, ".")
	var build func(i int) any
	build = func(i int) any {
		obj := map[string]any{}
		if i == len(segs)-1 {
			if set {
				obj[strings.TrimSuffix(segs[i], "[]")] = value
			}
			return obj
		}
		name, arr := strings.CutSuffix(segs[i], "[]")
		if arr {
			obj[name] = []any{build(i + 1)}
		} else {
			obj[name] = build(i + 1)
		}
		return obj
	}
	return config.Parse([]byte(marshal(build(0))))
}
