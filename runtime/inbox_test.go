package runtime

import (
	"encoding/json"
	"testing"
)

// TestTextInbox writes a text message's in/message.json by hand, as json.Marshal writes
// the general shape.
func TestTextInbox(t *testing.T) {
	for _, req := range []TaskRequest{
		{TaskID: "tsk_1", ContextID: "ctx_1", Text: "count <these> \"words\"\n"},
		{TaskID: "tsk_2", ContextID: "ctx_2", MessageID: "tck-artifact-text-1", Text: ""},
		{TaskID: "tsk_3", ContextID: "ctx é", MessageID: "m\x01", Text: "日本\xff"},
	} {
		text := req.Text
		want, _ := json.Marshal(inboxMessage{MessageID: req.MessageID, TaskID: req.TaskID, ContextID: req.ContextID,
			Parts: []inboxPart{{Kind: "text", Text: &text}}})
		if got := textInbox(req); string(got) != string(want) {
			t.Errorf("%s\nwant %s", got, want)
		}
	}
}

// TestInboxName sanitises a client's file name for in/.
func TestInboxName(t *testing.T) {
	for _, tc := range []struct{ given, mediaType, want string }{
		{"report.pdf", "", "report.pdf"},
		{"../../etc/passwd", "", "passwd"},
		{`C:\Users\me\photo 1.png`, "", "photo_1.png"},
		{".bashrc", "", "bashrc"},
		{"", "application/pdf", "file.pdf"},
		{"???", "", "file"},
		{"ü.txt", "", "_.txt"},
	} {
		if got := inboxName(tc.given, tc.mediaType); got != tc.want {
			t.Errorf("inboxName(%q, %q) = %q, want %q", tc.given, tc.mediaType, got, tc.want)
		}
	}
}
