// Package mediatype reads media types as the manifest, the A2A layer and the runtime all
// need to: a declared type or range checked, a file's type told from its name.
package mediatype

import (
	"mime"
	"path"
	"strings"
)

// Base is a media type without its parameters, in lower case.
func Base(mt string) string {
	base, _, _ := strings.Cut(mt, ";")
	return strings.ToLower(strings.TrimSpace(base))
}

// ValidRange accepts a media type or range: type/subtype, type/* or */*, parameters after
// ';' allowed (RFC 9110 token characters).
func ValidRange(mt string) bool {
	typ, sub, ok := strings.Cut(Base(mt), "/")
	token := func(s string) bool {
		return s != "" && !strings.ContainsFunc(s, func(r rune) bool {
			return r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r)
		})
	}
	return ok && token(typ) && token(sub) && (typ != "*" || sub == "*")
}

// OfFile is a file's media type: given when not empty, else the one its name's extension
// says, else application/octet-stream.
func OfFile(given, name string) string {
	if given != "" {
		return given
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}
