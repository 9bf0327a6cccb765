// Command murmurtool is a native tool speaking the protocol Murmur's native tools
// expect: {"data": "<arguments as a JSON string>", "log_path": "<file>"|null} on
// stdin, {"status", "summary", "data"} on stdout. Unlike Murmur's own fixture it
// refuses data that is not a string, so a test sees the host encode it as Murmur does.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

func main() {
	out, _ := json.Marshal(run())
	fmt.Println(string(out))
}

type reply struct {
	Status  string `json:"status"`
	Summary string `json:"summary"`
	Data    any    `json:"data"`
}

func run() reply {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		return reply{"failed", "failed to read stdin", nil}
	}
	var envelope struct {
		Data    json.RawMessage `json:"data"`
		LogPath *string         `json:"log_path"`
	}
	if err := json.Unmarshal(raw, &envelope); err != nil {
		return reply{"failed", "invalid stdin JSON: " + err.Error(), nil}
	}
	var text string
	if err := json.Unmarshal(envelope.Data, &text); err != nil {
		return reply{"failed", "data is not a JSON string: " + string(envelope.Data), nil}
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(text), &args); err != nil {
		return reply{"failed", "invalid data JSON string: " + err.Error(), nil}
	}
	if envelope.LogPath != nil {
		f, err := os.OpenFile(*envelope.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return reply{"failed", "log_path: " + err.Error(), nil}
		}
		fmt.Fprintf(f, "murmur-tool-fixture: %v\n", args["operation"])
		f.Close()
	}
	return reply{"passed", "decoded", map[string]any{"args": args, "data": text}}
}
