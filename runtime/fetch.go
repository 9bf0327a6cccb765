package runtime

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"sync"

	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
)

// ErrFileTooLarge is what FetchFile returns (wrapped) for a file over its limit.
var ErrFileTooLarge = errors.New("file over its limit")

// fetcher fetches the files a task's message names by URL (FetchFile).
type fetcher struct {
	once sync.Once
	out  *murmur.Outgoing
}

// FetchFile reads the file at url for a task's message as the capsule's guests could:
// only where its network rules (capabilities.network.allow) let it connect, without
// following redirects, at most limit bytes (ErrFileTooLarge beyond). It returns the bytes
// and the media type the server gave ("" for none). A refusal is counted and named as a
// guest's would be.
func (h *Hosted) FetchFile(ctx context.Context, url string, limit int64) ([]byte, string, error) {
	h.fetch.once.Do(func() {
		m := h.staged.Manifest
		// The capsule's file limit (a2a.max_file_bytes, the same at every call) decides,
		// not the guests' response cap, which a larger limit would otherwise hit first.
		h.fetch.out = &murmur.Outgoing{Capsule: m.Name, Rules: m.Capabilities.NetworkRules, Metrics: h.metrics,
			MaxResponseBody: max(limit+1, murmur.DefaultMaxResponseBody)}
		h.fetch.out.Init()
	})
	resp, err := h.fetch.out.Open(ctx, "a2a-message", murmur.OutgoingRequest{Method: "GET", URL: url})
	if err != nil {
		return nil, "", err
	}
	defer resp.Close()
	if resp.Status != 200 {
		return nil, "", fmt.Errorf("the server answered HTTP %d", resp.Status)
	}
	var mediaType string
	for _, kv := range resp.Headers {
		if kv[0] == "content-type" {
			if mt, _, err := mime.ParseMediaType(kv[1]); err == nil {
				mediaType = mt
			}
		}
	}
	var data []byte
	for {
		b, err := resp.Read(murmur.MaxRead)
		if err != nil {
			return nil, "", err
		}
		if len(b) == 0 {
			return data, mediaType, nil
		}
		data = append(data, b...)
		if int64(len(data)) > limit {
			return nil, "", fmt.Errorf("%w: more than %d bytes", ErrFileTooLarge, limit)
		}
	}
}
