package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/capsulegate/capsulegate/errs"
)

// maxNodes bounds how many YAML nodes one document may expand to, so anchors and aliases
// cannot be used to make a small file decode into a huge value.
const maxNodes = 200_000

// Pos is a 1-based line and column in a YAML file.
type Pos struct{ Line, Col int }

// decoder walks a yaml.Node tree into Go values strictly: every type mismatch, missing
// required key and duplicate key is an error with file:line:col and key path; unknown
// keys are warnings naming the nearest known key; ${NAME} is interpolated in scalars.
type decoder struct {
	file    string
	env     func(string) (string, bool)
	errs    errs.List
	warns   []*errs.Error
	pos     map[string]Pos  // key path → position of its value (present keys only)
	written map[string]bool // key paths given a value other than null
	nodes   int
	budget  bool // set once maxNodes was exceeded, to report it once
	literal bool // no ${NAME} interpolation (artifact manifests)
	// noKeys leaves gateway keys unresolved (WithoutGatewayKeys).
	noKeys bool
}

func newDecoder(file string, env func(string) (string, bool)) *decoder {
	return &decoder{file: file, env: env, pos: map[string]Pos{}, written: map[string]bool{}}
}

func (d *decoder) at(n *yaml.Node) string {
	return fmt.Sprintf("%s:%d:%d", d.file, n.Line, n.Column)
}

func (d *decoder) fail(n *yaml.Node, path, code, msg, fix string) {
	d.errs = append(d.errs, &errs.Error{Code: code, Part: "manifest", Pos: d.at(n), Path: path, Msg: msg, Fix: fix})
}

// parseYAML parses data into a document node, mapping syntax errors to E-MAN-001.
func (d *decoder) parseYAML(data []byte) *yaml.Node {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	err := dec.Decode(&doc)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	if err == nil && doc.Kind != 0 {
		var next yaml.Node
		if dec.Decode(&next) == nil {
			d.errs = append(d.errs, &errs.Error{Code: CodeSyntax, Part: "manifest", Pos: fmt.Sprintf("%s:%d:%d", d.file, next.Line, next.Column),
				Msg: "the file holds more than one YAML document", Fix: "remove the `---` and everything after it, or merge the documents"})
			return nil
		}
	}
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		pos := d.file
		// yaml.v3 reports "line N: …"; keep the line in the position where it gives one.
		if rest, ok := strings.CutPrefix(msg, "line "); ok {
			if i := strings.Index(rest, ":"); i > 0 {
				if _, err := strconv.Atoi(rest[:i]); err == nil {
					pos = d.file + ":" + rest[:i]
					msg = strings.TrimSpace(rest[i+1:])
				}
			}
		}
		d.errs = append(d.errs, &errs.Error{Code: CodeSyntax, Part: "manifest", Pos: pos,
			Msg: "not valid YAML: " + msg, Fix: "correct the YAML syntax at that line"})
		return nil
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		d.errs = append(d.errs, &errs.Error{Code: CodeSyntax, Part: "manifest", Pos: d.file,
			Msg: "the file is empty", Fix: "write a YAML mapping with at least `name` and `version`"})
		return nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		d.fail(root, "", CodeType, "the top level must be a mapping of keys, got "+kindName(root), "write `key: value` lines, starting with `name:`")
		return nil
	}
	return root
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// resolve follows aliases and charges the node budget.
func (d *decoder) resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	d.nodes++
	return n
}

func (d *decoder) overBudget(n *yaml.Node, path string) bool {
	if d.nodes <= maxNodes {
		return false
	}
	if !d.budget {
		d.budget = true
		d.fail(n, path, CodeTooLarge, fmt.Sprintf("the document expands to more than %d values (anchors and aliases count each time they are used)", maxNodes),
			"write the values out instead of nesting aliases")
	}
	return true
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "null"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an unsupported node"
}

// decode fills v (addressable) from n; path is the key path of n.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	n = d.resolve(n)
	if n == nil || d.overBudget(n, path) {
		return
	}
	if path != "" {
		d.pos[path] = Pos{n.Line, n.Column}
	}
	if isNull(n) && v.Kind() != reflect.Interface {
		return // null leaves the zero value: "absent"
	}
	if path != "" && !isNull(n) {
		d.written[path] = true
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(n, path, CodeType, "expected a list, got "+kindName(n), "write a YAML list (`- item` lines or `[a, b]`)")
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			if isNull(d.resolve(c)) && s.Index(i).Kind() == reflect.Struct {
				d.fail(c, p, CodeMissing, "the list item is empty", "write the item's keys, or remove the empty `-` line")
				continue
			}
			d.decode(c, s.Index(i), p)
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.fail(n, path, CodeType, "expected a mapping, got "+kindName(n), "write a YAML mapping (`key: value` lines)")
			return
		}
		m := reflect.MakeMap(v.Type())
		d.eachPair(n, path, func(key string, kn, vn *yaml.Node) {
			ev := reflect.New(v.Type().Elem()).Elem()
			d.decode(vn, ev, join(path, key))
			m.SetMapIndex(reflect.ValueOf(key), ev)
		})
		v.Set(m)
	case reflect.Interface:
		if val, ok := d.generic(n, path); ok && val != nil {
			v.Set(reflect.ValueOf(val))
		}
	case reflect.String:
		if s, ok := d.scalar(n, path, "a string"); ok {
			v.SetString(s)
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		s, ok := d.scalar(n, path, "an integer")
		if !ok {
			return
		}
		i, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
		if err != nil || v.OverflowInt(i) {
			d.fail(n, path, CodeType, fmt.Sprintf("expected an integer, got %q", s), "write a whole number such as 30")
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		s, ok := d.scalar(n, path, "a number")
		if !ok {
			return
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			d.fail(n, path, CodeType, fmt.Sprintf("expected a number, got %q", s), "write a number such as 0.5")
			return
		}
		v.SetFloat(f)
	case reflect.Bool:
		s, ok := d.scalar(n, path, "true or false")
		if !ok {
			return
		}
		switch s {
		case "true":
			v.SetBool(true)
		case "false":
			v.SetBool(false)
		default:
			d.fail(n, path, CodeType, fmt.Sprintf("expected true or false, got %q", s), "write true or false")
		}
	default:
		panic("manifest: unsupported field kind " + v.Kind().String())
	}
}

// scalar returns n's interpolated text, or reports a type error.
func (d *decoder) scalar(n *yaml.Node, path, want string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.fail(n, path, CodeType, "expected "+want+", got "+kindName(n), "write a single value, not a list or mapping")
		return "", false
	}
	return d.interpolate(n, path, n.Value)
}

// eachPair visits a mapping's pairs, refusing non-string and duplicate keys.
func (d *decoder) eachPair(n *yaml.Node, path string, fn func(key string, kn, vn *yaml.Node)) {
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := d.resolve(n.Content[i]), n.Content[i+1]
		if kn.Kind != yaml.ScalarNode {
			d.fail(kn, path, CodeType, "a mapping key must be a plain string, got "+kindName(kn), "use a plain word as the key")
			continue
		}
		if kn.Tag == "!!merge" {
			d.fail(kn, path, CodeType, "merge keys (`<<`) are not supported", "write the keys out")
			continue
		}
		key := kn.Value
		if seen[key] {
			d.fail(kn, join(path, key), CodeDuplicateKey, fmt.Sprintf("key %q appears twice in this mapping", key), "keep one of them")
			continue
		}
		seen[key] = true
		fn(key, kn, vn)
	}
}

// fieldInfo describes one struct field's YAML key.
type fieldInfo struct {
	index    int
	key      string
	required bool
}

func structFields(t reflect.Type) []fieldInfo {
	var out []fieldInfo
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if key == "" || key == "-" || !f.IsExported() {
			continue
		}
		out = append(out, fieldInfo{index: i, key: key, required: f.Tag.Get("required") == "true"})
	}
	return out
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, CodeType, "expected a mapping, got "+kindName(n), "write `key: value` lines under it")
		return
	}
	fields := structFields(v.Type())
	byKey := map[string]fieldInfo{}
	known := make([]string, 0, len(fields))
	for _, f := range fields {
		byKey[f.key] = f
		known = append(known, f.key)
	}
	present := map[string]bool{}
	d.eachPair(n, path, func(key string, kn, vn *yaml.Node) {
		f, ok := byKey[key]
		if !ok {
			d.warnUnknown(kn, join(path, key), key, known)
			return
		}
		present[key] = true
		d.decode(vn, v.Field(f.index), join(path, key))
	})
	for _, f := range fields {
		if !f.required {
			continue
		}
		if !present[f.key] || v.Field(f.index).IsZero() {
			d.fail(n, join(path, f.key), CodeMissing, fmt.Sprintf("required key %q is missing or empty", f.key),
				fmt.Sprintf("add `%s: …` to this mapping", f.key))
		}
	}
}

func (d *decoder) warnUnknown(kn *yaml.Node, path, key string, known []string) {
	fix := "remove it"
	if near := nearest(key, known); near != "" {
		fix = fmt.Sprintf("did you mean %q? (known keys: %s)", near, strings.Join(sortedCopy(known), ", "))
	} else if len(known) > 0 {
		fix = "remove it; known keys here: " + strings.Join(sortedCopy(known), ", ")
	}
	d.warns = append(d.warns, &errs.Error{Code: CodeUnknownKey, Part: "manifest", Pos: d.at(kn), Path: path,
		Msg: fmt.Sprintf("unknown key %q is ignored", key), Fix: fix})
}

// generic decodes free-form values (config maps, schemas) into JSON-compatible Go values.
func (d *decoder) generic(n *yaml.Node, path string) (any, bool) {
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		d.eachPair(n, path, func(key string, _, vn *yaml.Node) {
			vn = d.resolve(vn)
			if vn == nil || d.overBudget(vn, path) {
				return
			}
			if val, ok := d.generic(vn, join(path, key)); ok {
				m[key] = val
			}
		})
		return m, true
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			c = d.resolve(c)
			if c == nil || d.overBudget(c, path) {
				return out, true
			}
			if val, ok := d.generic(c, fmt.Sprintf("%s[%d]", path, i)); ok {
				out = append(out, val)
			}
		}
		return out, true
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return nil, true
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err == nil {
				return b, true
			}
		case "!!int":
			var i int64
			if err := n.Decode(&i); err == nil {
				return i, true
			}
		case "!!float":
			var f float64
			if err := n.Decode(&f); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
				return f, true
			}
			d.fail(n, path, CodeType, fmt.Sprintf("%q is not a finite number", n.Value), "write a finite number or quote it as a string")
			return nil, false
		}
		return d.interpolate(n, path, n.Value)
	}
	d.fail(n, path, CodeType, "unsupported YAML value "+kindName(n), "write a plain value")
	return nil, false
}

// interpolate replaces ${NAME} with the host environment variable NAME; "$${" writes a
// literal "${".
func (d *decoder) interpolate(n *yaml.Node, path, s string) (string, bool) {
	if d.literal || !strings.Contains(s, "${") {
		return s, true
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), true
		}
		if i > 0 && s[i-1] == '$' {
			b.WriteString(s[:i-1])
			b.WriteString("${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			d.fail(n, path, CodeInterpSyntax, fmt.Sprintf("%q opens ${ without a closing }", n.Value), "write ${NAME}, or $${ for a literal ${")
			return "", false
		}
		name := s[i+2 : i+end]
		if !validEnvName(name) {
			d.fail(n, path, CodeInterpSyntax, fmt.Sprintf("${%s} is not a valid variable reference: names are UPPER_SNAKE_CASE", name),
				"use an UPPER_SNAKE_CASE variable name such as ${MY_ENDPOINT}")
			return "", false
		}
		if d.noKeys && isKeyPath(path) {
			// A key is read only to run; here it is not needed, set or not.
			s = s[i+end+1:]
			continue
		}
		val, ok := d.env(name)
		if !ok {
			d.fail(n, path, CodeUnsetEnv, fmt.Sprintf("environment variable %s is not set (referenced as ${%s})", name, name),
				fmt.Sprintf("export %s before starting, or remove the reference", name))
			return "", false
		}
		b.WriteString(val)
		s = s[i+end+1:]
	}
}

// isKeyPath reports whether a key path names a gateway API key: a driver's
// gateway.api_key or the older inference.api_key.
func isKeyPath(path string) bool {
	return path == "inference.api_key" || strings.HasPrefix(path, "artifacts[") && strings.HasSuffix(path, "].gateway.api_key")
}

// validEnvName reports whether s is UPPER_SNAKE_CASE: [A-Z][A-Z0-9_]*.
func validEnvName(s string) bool {
	if s == "" || !(s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// nearest returns the known key closest to key by edit distance, if it is close enough
// to be a likely typo.
func nearest(key string, known []string) string {
	best, bestD := "", math.MaxInt
	for _, k := range known {
		if dd := editDistance(strings.ToLower(key), k); dd < bestD || dd == bestD && k < best {
			best, bestD = k, dd
		}
	}
	limit := max(2, len(key)/3)
	if bestD <= limit {
		return best
	}
	return ""
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	sort.Strings(c)
	return c
}

// Positions maps key paths of a decoded file to where their values stand.
type Positions struct {
	file string
	pos  map[string]Pos
}

// At returns "file:line:col" for the value at path, or of its nearest present parent.
func (p Positions) At(path string) string {
	for q := path; q != ""; {
		if pos, ok := p.pos[q]; ok {
			return fmt.Sprintf("%s:%d:%d", p.file, pos.Line, pos.Col)
		}
		i := strings.LastIndexAny(q, ".[")
		if i <= 0 {
			break
		}
		q = q[:i]
	}
	return p.file
}

// DecodeStrict decodes YAML into v (a pointer to a struct with `yaml` and `required`
// tags) with the manifest's strictness and positions but without interpolation; other
// YAML files of the project (murmur.lock) use it. Warnings are unknown keys.
func DecodeStrict(data []byte, file string, v any) (Positions, []*errs.Error, error) {
	d := newDecoder(file, nil)
	d.literal = true
	root := d.parseYAML(data)
	if root == nil {
		return Positions{}, nil, d.errs
	}
	d.decode(root, reflect.ValueOf(v).Elem(), "")
	if len(d.errs) > 0 {
		return Positions{}, nil, d.errs
	}
	return Positions{file: file, pos: d.pos}, d.warns, nil
}
