// Package jsontext appends JSON text by hand on the paths that write the same small
// shapes for every task, where encoding/json's reflection would cost more than the rest.
package jsontext

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// AppendString appends s as a JSON string, escaped as encoding/json escapes it (HTML
// characters too), so the bytes are the ones json.Marshal writes.
func AppendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' || c >= utf8.RuneSelf {
			b, _ := json.Marshal(s) // a string always encodes
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// Compact is valid JSON raw without insignificant white space (raw itself, copied, when it
// does not compact).
func Compact(raw []byte) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return append(json.RawMessage(nil), raw...)
	}
	return b.Bytes()
}
