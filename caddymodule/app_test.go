package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

// TestParseAppCaddyfile reads the global `capsule { … }` option into the app's JSON.
func TestParseAppCaddyfile(t *testing.T) {
	off := false
	tests := []struct {
		name, in string
		want     App
		err      string
	}{
		{"all", "capsule {\n registry /r\n work_root /w\n cache_dir /c\n dns_upstream 127.0.0.1:53\n init_snapshots off\n}",
			App{Registry: "/r", WorkRoot: "/w", CacheDir: "/c", DNSUpstream: "127.0.0.1:53", InitSnapshots: &off}, ""},
		{"snapshots on", "capsule {\n init_snapshots on\n}", App{}, ""},
		{"reuse", "capsule {\n instance_reuse on\n}", App{InstanceReuse: true}, ""},
		{"bad reuse", "capsule {\n instance_reuse yes\n}", App{}, "instance_reuse takes on or off"},
		{"bad snapshots", "capsule {\n init_snapshots maybe\n}", App{}, "init_snapshots takes on or off"},
		{"unknown", "capsule {\n registri /r\n}", App{}, `unknown capsule option "registri"`},
		{"missing value", "capsule {\n registry\n}", App{}, "wrong argument count"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := parseAppCaddyfile(caddyfile.NewTestDispenser(tt.in), nil)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got App
			if err := json.Unmarshal(v.(httpcaddyfile.App).Value, &got); err != nil {
				t.Fatal(err)
			}
			if got.Registry != tt.want.Registry || got.WorkRoot != tt.want.WorkRoot || got.CacheDir != tt.want.CacheDir ||
				got.DNSUpstream != tt.want.DNSUpstream || got.initSnapshots() != tt.want.initSnapshots() ||
				got.InstanceReuse != tt.want.InstanceReuse {
				t.Errorf("app = %+v, want %+v", got, tt.want)
			}
		})
	}
}
