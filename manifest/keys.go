package manifest

import (
	"reflect"
	"regexp"
	"slices"
)

// KeyPaths lists every key path the parser accepts in a capsule manifest, sorted, in the
// spelling of docs/reference/manifest.md: "artifacts[].config", "inference.compaction".
// It is read from the decoder's own struct tags, so a key added to the parser is listed
// here with no other change.
func KeyPaths() []string { return keyPaths(reflect.TypeFor[Manifest]()) }

// ArtifactKeyPaths lists every key path the parser accepts in an artifact manifest (the
// murmur.yaml inside a .mur.zip), sorted, as KeyPaths does.
func ArtifactKeyPaths() []string { return keyPaths(reflect.TypeFor[ArtifactManifest]()) }

// keyPaths lists every key path the decoder accepts in a value of type t: struct keys
// joined by ".", "[]" after a list of mappings, "*" for the keys of a map of mappings.
// Mappings themselves are listed too; free-form values (map[string]any) and lists of
// scalars are leaves. Keys come from structFields, the decoder's own reading of the tags.
func keyPaths(t reflect.Type) []string {
	var out []string
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			for _, f := range structFields(t) {
				p := join(prefix, f.key)
				out = append(out, p)
				walk(t.Field(f.index).Type, p)
			}
		case reflect.Slice:
			walk(t.Elem(), prefix+"[]")
		case reflect.Map:
			walk(t.Elem(), join(prefix, "*"))
		}
	}
	walk(t, "")
	slices.Sort(out)
	return out
}

// listIndex is a list index in a concrete key path ("artifacts[2].config").
var listIndex = regexp.MustCompile(`\[[0-9]+\]`)

// Written returns the paths, sorted, at which the file wrote key (a path of KeyPaths:
// "artifacts[].config" matches "artifacts[0].config" and "artifacts[3].config") with a
// value other than null: a key written as null or empty reads as absent, so it is not
// written. A manifest not read from a file has written nothing.
func (m *Manifest) Written(key string) []string {
	var out []string
	for p := range m.written {
		if listIndex.ReplaceAllString(p, "[]") == key {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
