package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/capsulegate/capsulegate/internal/clip"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"

	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// callDriverWith is callDriver with the text the driver streams handed to emit, which a
// call whose text is not the task's answer (a compaction's summary) discards.
func (s *session) callDriverWith(ctx context.Context, driver *wasm.Module, req string, emit func(thinking bool, text string)) (resp *driverResponse, streamed bool, err error) {
	g := s.grants(driver.Artifact, manifest.RoleDriver)
	g.Env = append(append([]string(nil), g.Env...), s.driverEnv...)
	chunk := func(thinking bool, text string) {
		streamed = streamed || !thinking
		emit(thinking, text)
	}
	out, err := murmur.CallTool(ctx, s.rt.engine, driver, g, &murmur.Imports{Who: driver.Artifact, HTTP: s.driverHTTP, Chunk: chunk}, abi.ToolInput{Data: &req})
	if err != nil {
		return nil, streamed, err
	}
	if out.Status != abi.StatusPassed {
		return nil, streamed, fmt.Errorf("driver %s answered %s: %s", driver.Artifact, out.Status, value(out.Summary))
	}
	resp = &driverResponse{}
	if err := json.Unmarshal([]byte(value(out.Data)), resp); err != nil {
		return nil, streamed, fmt.Errorf("driver %s returned data that is not the driver JSON (%v): %q", driver.Artifact, err, clip.String(value(out.Data), 200))
	}
	if resp.ContinuationID == "" {
		// Upstream Murmur's drivers return it as tool-result metadata.
		for _, kv := range out.Metadata {
			if kv[0] == "continuation_id" {
				resp.ContinuationID = kv[1]
			}
		}
	}
	return resp, streamed, nil
}

// driverKey names the capsule's driver as it is staged: the issuer of its continuations.
func (s *session) driverKey() string {
	d := s.staged.Manifest.Inference.Driver.Artifact
	for _, a := range s.staged.Artifacts {
		if a.Name == d {
			return a.Name + "@" + a.Version
		}
	}
	return d
}

// driverSetup prepares what the driver alone gets: the MURMUR_INFERENCE_* environment and
// an HTTP host that may reach its gateway endpoint, adding the key to those requests.
func (s *session) driverSetup() error {
	m := s.staged.Manifest
	inf := m.Inference
	d := m.Artifact(inf.Driver.Artifact)
	endpoint, key := "", ""
	if d != nil && d.Gateway != nil {
		endpoint, key = strings.TrimSuffix(d.Gateway.Endpoint, "/"), d.Gateway.APIKey
	}
	cfg := "{}"
	if inf.Driver.Config != nil {
		cfg = string(mustJSON(inf.Driver.Config))
	}
	s.driverEnv = []string{"MURMUR_INFERENCE_TRANSPORT=" + inf.Transport, "MURMUR_INFERENCE_MODEL=" + inf.Model,
		"MURMUR_INFERENCE_ENDPOINT=" + endpoint, "MURMUR_INFERENCE_DRIVER=" + inf.Driver.Artifact, "MURMUR_INFERENCE_DRIVER_CONFIG=" + cfg}
	rules := append(netpolicy.Rules(nil), m.Capabilities.NetworkRules...)
	var creds []murmur.Credential
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil || u.Host == "" {
			return fmt.Errorf("driver %s: gateway endpoint %q is not a URL", inf.Driver.Artifact, endpoint)
		}
		r, err := netpolicy.ParseRule(u.Scheme + "://" + u.Host)
		if err != nil {
			return fmt.Errorf("driver %s: gateway endpoint %q: %w", inf.Driver.Artifact, endpoint, err)
		}
		rules = append(rules, r)
		c := murmur.Credential{Endpoint: endpoint}
		if key != "" {
			c.Headers = s.upstreamAuth(inf.Driver.Artifact).Headers(key)
		}
		creds = append(creds, c)
	}
	s.driverHTTP = &murmur.Outgoing{Capsule: m.Name, Rules: rules, Metrics: s.rt.engine.Metrics(), Credentials: creds, OnDeny: s.http.OnDeny, Sleep: s.http.Sleep, Traffic: &s.traffic}
	s.driverHTTP.Init()
	return nil
}

// upstreamAuth is how the driver's provider expects the key: the driver artifact's own
// upstream_auth, else a bearer token.
func (s *session) upstreamAuth(driver string) manifest.UpstreamAuth {
	for _, a := range s.staged.Artifacts {
		if a.Name == driver && a.Archive != nil {
			if u := a.Archive.Manifest().UpstreamAuth; u != nil {
				return *u
			}
		}
	}
	return manifest.DefaultUpstreamAuth
}

func finalText(content []agentBlock) string {
	var parts []string
	for _, b := range content {
		if b.Type == "text" && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// completeOnce asks the capsule's driver for one completion of msgs: no tools, no
// continuation, its streamed text reaching no subscriber (it is not the task's answer).
// It returns the answer's text, the request sent and the driver's raw answer.
func (s *session) completeOnce(ctx context.Context, driver *wasm.Module, model, system string, msgs []agentMessage) (text, sent string, resp *driverResponse, err error) {
	req, _ := json.Marshal(driverRequest{Model: model, MaxTokens: s.staged.Manifest.Inference.MaxTokens, System: system, Messages: msgs, Tools: []agentTool{}})
	resp, _, err = s.callDriverWith(ctx, driver, string(req), func(bool, string) {})
	if err != nil {
		return "", string(req), nil, err
	}
	switch resp.StopReason {
	case "end_turn", "max_tokens":
		return finalText(resp.Content), string(req), resp, nil
	case "error":
		return "", string(req), resp, fmt.Errorf("driver %s: %s", driver.Artifact, resp.Error)
	}
	return "", string(req), resp, fmt.Errorf("driver %s answered stop_reason %q", driver.Artifact, resp.StopReason)
}
