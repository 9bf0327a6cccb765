package mcpbridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/capsulegate/capsulegate/mcpbridge"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// headerTransport sends the bridge's bearer token, as a harness told of it does.
type headerTransport struct{ token string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+h.token)
	return http.DefaultTransport.RoundTrip(r)
}

// A run starts a bridge for the capsule's tools, hands its URL and token to the harness
// (here the SDK's client stands in for it) and closes the bridge when the run ends.
func Example() {
	ctx := context.Background()
	b, err := mcpbridge.Start(ctx, mcpbridge.Config{
		ServerName: "notes",
		Tools: []mcpbridge.Tool{{
			Name:        "search",
			Description: "Search the notes.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`),
		}},
		Dispatch: func(ctx context.Context, name string, input json.RawMessage) (string, bool, error) {
			var args struct{ Q string }
			if err := json.Unmarshal(input, &args); err != nil {
				return err.Error(), true, nil
			}
			return "3 notes mention " + args.Q, false, nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()

	client := mcp.NewClient(&mcp.Implementation{Name: "harness", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   b.URL(),
		HTTPClient: &http.Client{Transport: headerTransport{b.Token()}},
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"q": "wazero"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	// Output: 3 notes mention wazero
}
