package a2a

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// partKind is what one part of a message carries.
type partKind int

const (
	partText partKind = iota
	partFile          // a file: inline bytes or a URL
	partData          // a structured JSON value
)

// String names the kind as A2A 0.3's "kind" member does.
func (k partKind) String() string {
	return [...]string{"text", "file", "data"}[k]
}

// part is one part of a user message, decoded from whichever binding and version brought
// it: 0.3's {kind, text | file{bytes | uri, name, mimeType} | data} and 1.0's {text | raw |
// url | data, filename, mediaType} alike.
type part struct {
	kind      partKind
	text      string
	bytes     []byte          // a file's inline content, decoded
	url       string          // a file by reference
	name      string          // the file's name as the client gave it, unsanitised
	mediaType string          // as the client gave it; "" when it gave none
	data      json.RawMessage // a data part's value
}

// inFile03 is an A2A 0.3 FilePart's file: FileWithBytes or FileWithUri.
type inFile03 struct {
	Bytes    *string `json:"bytes"`
	URI      *string `json:"uri"`
	Name     string  `json:"name"`
	MimeType string  `json:"mimeType"`
}

// parsePart decodes message part i, refusing a malformed one with invalid params naming
// the member and what it must hold. Whether the capsule reads the part's kind and media
// type is not decided here.
func (d dialect) parsePart(i int, p inPart) (part, *rpcError) {
	field := fmt.Sprintf("message.parts[%d]", i)
	if d == v03 {
		return parsePart03(field, p)
	}
	if p.Kind != "" {
		return part{}, errInvalidParams(fmt.Sprintf("%s.kind is an A2A 0.3 field; 1.0 parts hold one of text, raw, url or data", field))
	}
	members := 0
	for _, present := range []bool{p.Text != nil, isSet(p.Raw), isSet(p.URL), isSet(p.Data)} {
		if present {
			members++
		}
	}
	switch {
	case members == 0:
		return part{}, errInvalidParams(field + " holds none of text, raw, url or data")
	case members > 1:
		return part{}, errInvalidParams(field + " holds more than one of text, raw, url and data")
	}
	out := part{name: p.Filename, mediaType: p.MediaType}
	switch {
	case p.Text != nil:
		out.kind, out.text = partText, *p.Text
	case isSet(p.Raw):
		var s string
		if json.Unmarshal(p.Raw, &s) != nil {
			return part{}, errInvalidParams(field + ".raw must be a string of base64-encoded bytes")
		}
		b, err := decodeBase64(s)
		if err != nil {
			return part{}, errInvalidParams(fmt.Sprintf("%s.raw is not base64 (%v): encode the file's bytes in standard or URL-safe base64", field, err))
		}
		out.kind, out.bytes = partFile, b
	case isSet(p.URL):
		var s string
		if json.Unmarshal(p.URL, &s) != nil {
			return part{}, errInvalidParams(field + ".url must be a string")
		}
		if rerr := checkFileURL(field+".url", s); rerr != nil {
			return part{}, rerr
		}
		out.kind, out.url = partFile, s
	default:
		out.kind, out.data = partData, compactJSON(p.Data)
	}
	return out, nil
}

// parsePart03 decodes an A2A 0.3 part (JSON-RPC, and HTTP+JSON once rest03 has mapped it).
func parsePart03(field string, p inPart) (part, *rpcError) {
	switch p.Kind {
	case "text":
		if p.Text == nil {
			return part{}, errInvalidParams(field + `.text is required for kind "text"`)
		}
		return part{kind: partText, text: *p.Text}, nil
	case "file":
		var f inFile03
		if !isSet(p.File) || json.Unmarshal(p.File, &f) != nil { // only an object decodes into f
			return part{}, errInvalidParams(field + `.file is required for kind "file": an object holding bytes or uri`)
		}
		out := part{kind: partFile, name: f.Name, mediaType: f.MimeType}
		switch {
		case f.Bytes != nil && f.URI != nil:
			return part{}, errInvalidParams(field + ".file holds both bytes and uri; send one")
		case f.Bytes != nil:
			b, err := decodeBase64(*f.Bytes)
			if err != nil {
				return part{}, errInvalidParams(fmt.Sprintf("%s.file.bytes is not base64 (%v): encode the file's bytes in standard base64", field, err))
			}
			out.bytes = b
		case f.URI != nil:
			if rerr := checkFileURL(field+".file.uri", *f.URI); rerr != nil {
				return part{}, rerr
			}
			out.url = *f.URI
		default:
			return part{}, errInvalidParams(field + ".file holds neither bytes nor uri")
		}
		return out, nil
	case "data":
		if !isSet(p.Data) || p.Data[0] != '{' { // a RawMessage member holds its value without spaces
			return part{}, errInvalidParams(field + `.data is required for kind "data": a JSON object`)
		}
		return part{kind: partData, data: compactJSON(p.Data)}, nil
	case "":
		return part{}, errInvalidParams(field + `.kind is required: "text", "file" or "data"`)
	}
	return part{}, errInvalidParams(fmt.Sprintf(`%s.kind %q is not a part kind: "text", "file" or "data"`, field, p.Kind))
}

// decodeBase64 reads bytes as the JSON of both versions may carry them: standard or
// URL-safe alphabet, padded or not (proto3's JSON mapping accepts all four).
func decodeBase64(s string) ([]byte, error) {
	enc := base64.StdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.URLEncoding
	}
	if !strings.HasSuffix(s, "=") && len(s)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	return enc.DecodeString(s)
}

// checkFileURL accepts an absolute URL with a scheme and, for http and https, a host:
// what a file part may name. Whether the capsule may fetch it is decided where it is.
func checkFileURL(field, s string) *rpcError {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return errInvalidParams(fmt.Sprintf("%s is not a URL: %v", field, err))
	case u.Scheme == "" || !u.IsAbs():
		return errInvalidParams(fmt.Sprintf("%s %q is not an absolute URL: name the file with its scheme (https://…)", field, s))
	case (u.Scheme == "http" || u.Scheme == "https") && u.Host == "":
		return errInvalidParams(fmt.Sprintf("%s %q has no host", field, s))
	}
	return nil
}

// compactJSON is raw without insignificant white space (raw was decoded already, so it is
// valid JSON).
func compactJSON(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return append(json.RawMessage(nil), raw...)
	}
	return b.Bytes()
}
