package a2a

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/capsulegate/capsulegate/internal/clip"
	"github.com/capsulegate/capsulegate/internal/jsontext"
	"github.com/capsulegate/capsulegate/internal/mediatype"
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
		out.kind, out.data = partData, jsontext.Compact(p.Data)
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
		return part{kind: partData, data: jsontext.Compact(p.Data)}, nil
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

// Part is one part of a user message as an Executor receives it, in the order the client
// sent the parts: text, a file (its bytes, sent inline or fetched from the URL the client
// named) or structured data.
type Part struct {
	// Kind is "text", "file" or "data".
	Kind string `json:"kind"`
	// Text is a text part's text.
	Text string `json:"text,omitempty"`
	// Name is a file's name as the client gave it, unsanitised; "" when it gave none.
	Name string `json:"name,omitempty"`
	// MediaType is the part's media type: as the client gave it, else what the server of
	// a fetched file said, else guessed from the name; a data part's is application/json.
	MediaType string `json:"mediaType,omitempty"`
	// Bytes is a file's content.
	Bytes []byte `json:"bytes,omitempty"`
	// URL is where a file was fetched from; "" for bytes sent inline.
	URL string `json:"url,omitempty"`
	// Data is a data part's JSON value.
	Data json.RawMessage `json:"data,omitempty"`

	// Blob, BlobKey and Size are the handler's, in the task's records: a file over
	// InlineFileBytes is kept as the task's blob Blob, its URLs signed with BlobKey, and
	// Size is its length (files.go). An executor never sees or sets them.
	Blob    string `json:"blob,omitempty"`
	BlobKey []byte `json:"blobKey,omitempty"`
	Size    int64  `json:"size,omitempty"`
}

// Kinds of Part.
const (
	KindText = "text"
	KindFile = "file"
	KindData = "data"
)

// Inputs is what a capsule reads of a message beyond its text (docs/reference/a2a.md
// "Parts"): the media types it accepts, how much it takes, and how a file named by URL is
// fetched.
type Inputs struct {
	// Modes are the media types the capsule accepts, the card's defaultInputModes:
	// "type/subtype", "type/*" or "*/*"; text/plain is always accepted. Data parts need
	// application/json. Empty: text/plain only.
	Modes []string
	// MaxFileBytes bounds one file part (0: DefaultMaxFileBytes).
	MaxFileBytes int64
	// MaxMessageBytes bounds the files and data of one message together (0:
	// DefaultMaxMessageBytes). The request body limit grows by its base64 size.
	MaxMessageBytes int64
	// Fetch reads the file at url, at most limit bytes, as the capsule may reach it (its
	// network grants), returning its bytes and the media type its server gave ("" for
	// none); an error names why it was refused. nil: files by URL are refused.
	Fetch func(ctx context.Context, url string, limit int64) (data []byte, mediaType string, err error)
}

// ErrFileTooLarge is what an Inputs.Fetch returns (wrapped) for a file over its limit.
var ErrFileTooLarge = errors.New("a2a: file over its limit")

// Defaults of Inputs.
const (
	DefaultMaxFileBytes    = 4 << 20
	DefaultMaxMessageBytes = 16 << 20
)

// normalize fills in the defaults of in and reports what is wrong with it.
func (in Inputs) normalize() (Inputs, []string) {
	var bad []string
	for _, m := range in.Modes {
		if !mediatype.ValidRange(m) {
			bad = append(bad, fmt.Sprintf("input mode %q is not a media type: write type/subtype, type/* or */*", m))
		}
	}
	if in.MaxFileBytes < 0 || in.MaxMessageBytes < 0 {
		bad = append(bad, fmt.Sprintf("file limits %d and %d must not be negative", in.MaxFileBytes, in.MaxMessageBytes))
	}
	if in.MaxFileBytes == 0 {
		in.MaxFileBytes = DefaultMaxFileBytes
	}
	if in.MaxMessageBytes == 0 {
		in.MaxMessageBytes = max(DefaultMaxMessageBytes, in.MaxFileBytes)
	}
	return in, bad
}

// cardModes is the card's defaultInputModes: text/plain first, then the rest declared.
func (in Inputs) cardModes() []string { return withTextPlain(in.Modes) }

// withTextPlain is text/plain, then each of modes not already listed.
func withTextPlain(modes []string) []string {
	out := []string{"text/plain"}
	for _, m := range modes {
		if !slices.ContainsFunc(out, func(o string) bool { return strings.EqualFold(o, m) }) {
			out = append(out, m)
		}
	}
	return out
}

// takesPayload reports whether any file or data part can be accepted.
func (in Inputs) takesPayload() bool {
	return slices.ContainsFunc(in.Modes, func(m string) bool { return !isTextPlain(m) })
}

// bodyAllowance is how much a request body may grow beyond the route's limit so that a
// message at MaxMessageBytes, base64-encoded, still fits.
func (in Inputs) bodyAllowance() int64 {
	if !in.takesPayload() {
		return 0
	}
	return in.MaxMessageBytes/3*4 + 4
}

// accepts reports whether media type mt is one the capsule takes.
func (in Inputs) accepts(mt string) bool {
	if isTextPlain(mt) {
		return true
	}
	base := mediatype.Base(mt)
	typ, _, _ := strings.Cut(base, "/")
	for _, m := range in.Modes {
		m = mediatype.Base(m)
		if m == "*/*" || m == base || strings.HasSuffix(m, "/*") && strings.TrimSuffix(m, "/*") == typ {
			return true
		}
	}
	return false
}

// admitParts checks the parts of a message against what the capsule accepts and returns
// them as the executor will get them (files by URL not fetched yet), with the bytes of
// their files and data: a part of a media type the capsule does not take is
// ContentTypeNotSupportedError, one over a limit invalid params naming the limit. Nothing
// is kept of a refused message.
func admitParts(parts []part, in Inputs) ([]Part, int64, *rpcError) {
	out := make([]Part, 0, len(parts))
	var total int64
	modes := strings.Join(in.cardModes(), ", ")
	for i, p := range parts {
		field := fmt.Sprintf("message.parts[%d]", i)
		switch p.kind {
		case partText:
			if p.mediaType != "" && !in.accepts(p.mediaType) {
				return nil, 0, errContentType(fmt.Sprintf("%s.mediaType %q: this agent reads %s (defaultInputModes)", field, p.mediaType, modes), p.mediaType)
			}
			out = append(out, Part{Kind: KindText, Text: p.text, MediaType: p.mediaType})
		case partData:
			if !in.accepts("application/json") {
				return nil, 0, errContentType(fmt.Sprintf("%s is a data part; this agent reads %s (defaultInputModes), not application/json", field, modes), "application/json")
			}
			total += int64(len(p.data))
			if total > in.MaxMessageBytes {
				return nil, 0, overMessage(field, total, in.MaxMessageBytes)
			}
			out = append(out, Part{Kind: KindData, MediaType: "application/json", Data: p.data})
		case partFile:
			mt := p.mediaType // a file by URL without one: decided once fetched (fetchParts)
			if p.url == "" {
				mt = mediatype.OfFile(mt, p.name)
			}
			if mt != "" && !in.accepts(mt) {
				return nil, 0, errContentType(fmt.Sprintf("%s is a file of type %s; this agent reads %s (defaultInputModes)", field, mt, modes), mt)
			}
			if p.url != "" && in.Fetch == nil {
				return nil, 0, errContentType(fmt.Sprintf("%s names its file by URL; this agent takes files inline only: send the bytes", field), firstNonEmpty(mt, "application/octet-stream"))
			}
			if n := int64(len(p.bytes)); n > in.MaxFileBytes {
				return nil, 0, errInvalidParams(fmt.Sprintf("%s is a file of %d bytes, over this agent's limit of %d bytes per file (a2a.max_file_bytes)", field, n, in.MaxFileBytes))
			}
			total += int64(len(p.bytes))
			if total > in.MaxMessageBytes {
				return nil, 0, overMessage(field, total, in.MaxMessageBytes)
			}
			out = append(out, Part{Kind: KindFile, Name: p.name, MediaType: mt, Bytes: p.bytes, URL: p.url})
		}
	}
	return out, total, nil
}

// overMessage refuses part field for bringing a message's files and data to total bytes,
// over max.
func overMessage(field string, total, max int64) *rpcError {
	return errInvalidParams(fmt.Sprintf("%s brings the message's files and data to %d bytes, over this agent's limit of %d bytes per message (a2a.max_message_bytes)", field, total, max))
}

// fetchParts fetches the files parts name by URL, within the file and message limits
// (total: the bytes the message's other files and data hold), and checks the media type
// their servers give when the client gave none. A refusal names the part and why (a
// network rule, a limit, a failed fetch).
func fetchParts(ctx context.Context, parts []Part, total int64, in Inputs) *rpcError {
	for i := range parts {
		p := &parts[i]
		if p.Kind != KindFile || p.URL == "" {
			continue
		}
		field := fmt.Sprintf("message.parts[%d]", i)
		limit := min(in.MaxFileBytes, in.MaxMessageBytes-total)
		data, mt, err := in.Fetch(ctx, p.URL, limit)
		if errors.Is(err, ErrFileTooLarge) {
			if limit < in.MaxFileBytes {
				return errInvalidParams(fmt.Sprintf("%s: the file at %s brings the message's files and data over this agent's limit of %d bytes per message (a2a.max_message_bytes)", field, clipURL(p.URL), in.MaxMessageBytes))
			}
			return errInvalidParams(fmt.Sprintf("%s: the file at %s is over this agent's limit of %d bytes per file (a2a.max_file_bytes)", field, clipURL(p.URL), in.MaxFileBytes))
		}
		if err != nil {
			return errInvalidParams(fmt.Sprintf("%s: the file at %s cannot be fetched: %v", field, clipURL(p.URL), err))
		}
		if p.MediaType == "" {
			p.MediaType = mediatype.OfFile(mt, firstNonEmpty(p.Name, urlName(p.URL)))
			if !in.accepts(p.MediaType) {
				return errContentType(fmt.Sprintf("%s: the file at %s is of type %s; this agent reads %s (defaultInputModes)", field, clipURL(p.URL), p.MediaType, strings.Join(in.cardModes(), ", ")), p.MediaType)
			}
		}
		p.Bytes = data
		total += int64(len(data))
	}
	return nil
}

// urlName is the last segment of a URL's path, "" when it has none.
func urlName(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return path.Base(strings.TrimSuffix(u.Path, "/"))
}

// clipURL shortens a URL for an error message, leaving out its query (which may hold a
// token).
func clipURL(s string) string {
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	return clip.String(s, 200)
}

// fetchTimeout bounds the fetching of a message's files by URL.
const fetchTimeout = 60 * time.Second

// admit checks the message's parts against what the capsule accepts (Inputs), fetches the
// files it names by URL, and sets its text and payload. The payload is kept only when the
// message holds more than text, so a text message costs what it did.
func (in *incoming) admit(ctx context.Context, inputs Inputs) *rpcError {
	if plainText(in.parts) {
		if len(in.parts) == 1 {
			in.text = in.parts[0].text
		} else {
			texts := make([]string, len(in.parts))
			for i, p := range in.parts {
				texts[i] = p.text
			}
			in.text = strings.Join(texts, "\n")
		}
		in.parts = nil
		return nil
	}
	parts, total, rerr := admitParts(in.parts, inputs)
	if rerr != nil {
		return rerr
	}
	texts := make([]string, 0, len(parts))
	payload := false
	fetch := false
	for _, p := range parts {
		switch {
		case p.Kind == KindText:
			texts = append(texts, p.Text)
		case p.URL != "":
			fetch, payload = true, true
		default:
			payload = true
		}
	}
	in.text = strings.Join(texts, "\n")
	if fetch {
		ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
		defer cancel()
		if rerr := fetchParts(ctx, parts, total, inputs); rerr != nil {
			return rerr
		}
	}
	if payload {
		in.payload = parts
	}
	in.parts = nil
	return nil
}

// plainText reports whether every part is text without a media type: what a capsule
// always reads, with nothing to check.
func plainText(parts []part) bool {
	for _, p := range parts {
		if p.kind != partText || p.mediaType != "" {
			return false
		}
	}
	return true
}
