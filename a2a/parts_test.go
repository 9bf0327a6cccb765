package a2a

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestParsePart decodes every part shape of both versions — text, a file by bytes or by
// URL, data — and refuses each malformed one with invalid params naming the member.
func TestParsePart(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    dialect
		in   string
		want part   // when err is ""
		err  string // a fragment of the refusal's detail
	}{
		{"0.3 text", v03, `{"kind":"text","text":"hi"}`, part{kind: partText, text: "hi"}, ""},
		{"0.3 file bytes", v03, `{"kind":"file","file":{"bytes":"aGk=","name":"a.txt","mimeType":"text/plain"}}`,
			part{kind: partFile, bytes: []byte("hi"), name: "a.txt", mediaType: "text/plain"}, ""},
		{"0.3 file uri", v03, `{"kind":"file","file":{"uri":"https://example.com/a.pdf"}}`, part{kind: partFile, url: "https://example.com/a.pdf"}, ""},
		{"0.3 data", v03, `{"kind":"data","data":{ "k" : [1, 2] }}`, part{kind: partData, data: json.RawMessage(`{"k":[1,2]}`)}, ""},
		{"0.3 file without content", v03, `{"kind":"file","file":{"name":"a"}}`, part{}, ".file holds neither bytes nor uri"},
		{"0.3 file with both", v03, `{"kind":"file","file":{"bytes":"aGk=","uri":"https://e.com/a"}}`, part{}, "holds both bytes and uri"},
		{"0.3 file missing", v03, `{"kind":"file"}`, part{}, `.file is required for kind "file"`},
		{"0.3 file not an object", v03, `{"kind":"file","file":"aGk="}`, part{}, `.file is required for kind "file"`},
		{"0.3 bad base64", v03, `{"kind":"file","file":{"bytes":"a*b"}}`, part{}, ".file.bytes is not base64"},
		{"0.3 relative uri", v03, `{"kind":"file","file":{"uri":"a.pdf"}}`, part{}, "is not an absolute URL"},
		{"0.3 http uri without host", v03, `{"kind":"file","file":{"uri":"https:///a"}}`, part{}, "has no host"},
		{"0.3 data not an object", v03, `{"kind":"data","data":[1]}`, part{}, `.data is required for kind "data": a JSON object`},
		{"0.3 no kind", v03, `{"text":"hi"}`, part{}, ".kind is required"},
		{"1.0 text", v10, `{"text":"hi","mediaType":"text/plain"}`, part{kind: partText, text: "hi", mediaType: "text/plain"}, ""},
		{"1.0 raw, URL-safe unpadded", v10, `{"raw":"_-8","filename":"b.bin","mediaType":"application/octet-stream"}`,
			part{kind: partFile, bytes: []byte{0xff, 0xef}, name: "b.bin", mediaType: "application/octet-stream"}, ""},
		{"1.0 raw, standard", v10, `{"raw":"aGk="}`, part{kind: partFile, bytes: []byte("hi")}, ""},
		{"1.0 url", v10, `{"url":"http://127.0.0.1:9/f","filename":"f"}`, part{kind: partFile, url: "http://127.0.0.1:9/f", name: "f"}, ""},
		{"1.0 data, any value", v10, `{"data":[1,"x",null]}`, part{kind: partData, data: json.RawMessage(`[1,"x",null]`)}, ""},
		{"1.0 bad raw", v10, `{"raw":"%%%"}`, part{}, ".raw is not base64"},
		{"1.0 raw not a string", v10, `{"raw":12}`, part{}, ".raw must be a string"},
		{"1.0 url not a string", v10, `{"url":{}}`, part{}, ".url must be a string"},
		{"1.0 two members", v10, `{"text":"a","raw":"aGk="}`, part{}, "more than one of text, raw, url and data"},
		{"1.0 no member", v10, `{"filename":"a"}`, part{}, "holds none of text, raw, url or data"},
		{"1.0 0.3 kind", v10, `{"kind":"text","text":"a"}`, part{}, "kind is an A2A 0.3 field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p inPart
			if err := json.Unmarshal([]byte(tc.in), &p); err != nil {
				t.Fatal(err)
			}
			got, rerr := tc.d.parsePart(2, p)
			if tc.err != "" {
				if rerr == nil || rerr.Code != codeInvalidParams || !strings.Contains(rerr.detail, tc.err) || !strings.Contains(rerr.detail, "message.parts[2]") {
					t.Fatalf("got %+v, %v; want invalid params naming message.parts[2] with %q", got, rerr, tc.err)
				}
				return
			}
			if rerr != nil {
				t.Fatalf("refused: %v", rerr)
			}
			if got.kind != tc.want.kind || got.text != tc.want.text || string(got.bytes) != string(tc.want.bytes) || got.url != tc.want.url ||
				got.name != tc.want.name || got.mediaType != tc.want.mediaType || string(got.data) != string(tc.want.data) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestProtoNamesKeepsClientValues: proto field names become JSON names, but a data part's
// value and metadata keep their members as the client spelled them, and numbers keep
// every digit.
func TestProtoNamesKeepsClientValues(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"1.0 data part and metadata",
			`{"message":{"message_id":"m","parts":[{"data":{"user_id":12345678901234567890,"nested":{"a_b":1.50}}}],"metadata":{"trace_id":"t"}}}`,
			`{"message":{"messageId":"m","metadata":{"trace_id":"t"},"parts":[{"data":{"nested":{"a_b":1.50},"user_id":12345678901234567890}}]}}`},
		{"0.3 proto DataPart", `{"message":{"message_id":"m","content":[{"data":{"data":{"row_count":2}}}]}}`,
			`{"message":{"content":[{"data":{"data":{"row_count":2}}}],"messageId":"m"}}`},
		{"nothing to rename", `{"message":{"parts":[{"data":{"a_b":1}}]}}`, `{"message":{"parts":[{"data":{"a_b":1}}]}}`},
		{"proto names elsewhere still renamed", `{"configuration":{"history_length":2,"push_notification_config":{"url":"u"}}}`,
			`{"configuration":{"historyLength":2,"pushNotificationConfig":{"url":"u"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(protoNames(json.RawMessage(tc.in))); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
