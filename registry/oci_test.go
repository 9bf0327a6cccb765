package registry

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/capsulegate/capsulegate/errs"
	sha "github.com/capsulegate/capsulegate/internal/digest"
	"github.com/capsulegate/capsulegate/internal/testkit/ocitest"
	"github.com/capsulegate/capsulegate/manifest"
)

// noEnv keeps a test's registry client off the caller's Docker credentials.
func noEnv(string) string { return "" }

// ociAt opens the OCI registry spec names, anonymous unless opts say otherwise.
func ociAt(t *testing.T, spec string, opts OpenOptions) *OCI {
	t.Helper()
	src, err := ParseSource(spec)
	must(t, err)
	if opts.Getenv == nil {
		opts.Getenv = noEnv
	}
	o, err := NewOCI(src, opts)
	must(t, err)
	return o
}

func ociCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// ociArtifact is an archive with the given murmur.yaml lines and payload.
func ociArtifact(yaml string, payload zent) []byte {
	return makeZip(zent{name: "murmur.yaml", data: yaml}, payload)
}

// rawManifest GETs the manifest tag names in repo, as the registry stores it.
func rawManifest(t *testing.T, r *ocitest.Registry, repo, tag string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+r.Addr+"/v2/"+repo+"/manifests/"+tag, nil)
	req.Header.Set("Accept", ocispec.MediaTypeImageManifest)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET manifest %s:%s: %s", repo, tag, resp.Status)
	}
	var m map[string]any
	must(t, json.NewDecoder(resp.Body).Decode(&m))
	return m
}

// TestOCIRoundTrip publishes a wasm tool (with a '+' version), a native tool for two
// platforms beside a wasm build of the same version, and a skill to a real registry, and
// proves Fetch returns each one's bytes with their sha256, a native build wins on its
// platform and the wasm build answers elsewhere, the manifests have the documented
// layout, misses say what exists, and List describes everything.
func TestOCIRoundTrip(t *testing.T) {
	reg := ocitest.Start(t)
	o := ociAt(t, reg.URL(), OpenOptions{})
	ctx := ociCtx(t)
	wasm := ociArtifact("name: echo\nversion: 1.0.0+build.7\nruntime: tool\ndescription: says it back\ntags: [text, demo]\n", zent{name: "capsule.wasm", data: wasmMagic + "echo"})
	dualWasm := wasmArtifact("dual", "2.0.0", "portable")
	dualAmd := nativeArtifact("dual", "2.0.0", "amd64")
	dualArm := nativeArtifact("dual", "2.0.0", "arm64")
	onlyNative := nativeArtifact("gitx", "0.3.1", "amd64")
	skill := skillArtifact("style", "1.0.0")
	for _, p := range []struct {
		data     []byte
		platform string
	}{{wasm, ""}, {dualWasm, ""}, {dualAmd, PlatformLinuxX86_64}, {dualArm, PlatformLinuxAarch64}, {onlyNative, PlatformLinuxX86_64}, {skill, ""}} {
		b, err := o.Publish(ctx, p.data, p.platform)
		must(t, err)
		if b.SHA256 != sha.Hex(p.data) || b.Platform != p.platform || !bytes.Equal(b.Data, p.data) {
			t.Fatalf("Publish returned %s@%s (%s) sha256 %s", b.Name, b.Version, b.Platform, b.SHA256)
		}
	}

	fetches := []struct {
		ref  Ref
		want []byte
		plat string
	}{
		{Ref{Name: "echo", Version: "1.0.0+build.7"}, wasm, ""},
		{Ref{Name: "echo", Version: "1.0.0+build.7", Platform: PlatformDarwinAarch64}, wasm, ""},
		{Ref{Name: "dual", Version: "2.0.0", Platform: PlatformLinuxX86_64}, dualAmd, PlatformLinuxX86_64},
		{Ref{Name: "dual", Version: "2.0.0", Platform: PlatformLinuxAarch64}, dualArm, PlatformLinuxAarch64},
		{Ref{Name: "dual", Version: "2.0.0", Platform: PlatformDarwinX86_64}, dualWasm, ""},
		{Ref{Name: "dual", Version: "2.0.0"}, dualWasm, ""},
		{Ref{Name: "gitx", Version: "0.3.1", Platform: PlatformLinuxX86_64}, onlyNative, PlatformLinuxX86_64},
		{Ref{Name: "style", Version: "1.0.0"}, skill, ""},
	}
	for _, f := range fetches {
		b, err := o.Fetch(ctx, f.ref)
		if err != nil {
			t.Fatalf("Fetch %s: %v", f.ref, err)
		}
		if !bytes.Equal(b.Data, f.want) || b.SHA256 != sha.Hex(f.want) || b.Platform != f.plat || b.Archive != nil {
			t.Fatalf("Fetch %s: platform %q sha256 %s, want platform %q sha256 %s", f.ref, b.Platform, b.SHA256, f.plat, sha.Hex(f.want))
		}
	}

	m := rawManifest(t, reg, ocitest.Prefix+"/dual", "2.0.0-linux-x86_64")
	layer := m["layers"].([]any)[0].(map[string]any)
	config := m["config"].(map[string]any)
	ann := m["annotations"].(map[string]any)
	for what, got := range map[string]any{
		"mediaType":                m["mediaType"],
		"artifactType":             m["artifactType"],
		"config.mediaType":         config["mediaType"],
		"config.size":              config["size"],
		"layer.mediaType":          layer["mediaType"],
		"layer.digest":             layer["digest"],
		"layer title":              layer["annotations"].(map[string]any)[ocispec.AnnotationTitle],
		"name annotation":          ann[AnnotationName],
		"version annotation":       ann[AnnotationVersion],
		"runtime annotation":       ann[AnnotationRuntime],
		"implementation":           ann[AnnotationImplementation],
		"platform annotation":      ann[AnnotationPlatform],
		"layers in the manifest":   len(m["layers"].([]any)),
		"schemaVersion":            m["schemaVersion"],
		"config digest (of `{}`)":  config["digest"],
		"description when not set": ann[ocispec.AnnotationDescription],
	} {
		want := map[string]any{
			"mediaType": ocispec.MediaTypeImageManifest, "artifactType": OCIArtifactType, "config.mediaType": ocispec.MediaTypeEmptyJSON,
			"config.size": 2.0, "layer.mediaType": OCILayerMediaType, "layer.digest": "sha256:" + sha.Hex(dualAmd),
			"layer title": "dual-2.0.0-linux-x86_64.mur.zip", "name annotation": "dual", "version annotation": "2.0.0",
			"runtime annotation": "tool", "implementation": "native", "platform annotation": PlatformLinuxX86_64,
			"layers in the manifest": 1, "schemaVersion": 2.0, "config digest (of `{}`)": string(ocispec.DescriptorEmptyJSON.Digest),
			"description when not set": nil,
		}[what]
		if got != want {
			t.Errorf("manifest %s = %v, want %v", what, got, want)
		}
	}
	if ann := rawManifest(t, reg, ocitest.Prefix+"/echo", "1.0.0_build.7")["annotations"].(map[string]any); ann[ocispec.AnnotationDescription] != "says it back" || ann[AnnotationTags] != "text,demo" {
		t.Errorf("echo's annotations: %v", ann)
	}

	misses := []struct {
		ref  Ref
		code string
		says []string
	}{
		{Ref{Name: "echo", Version: "9.9.9"}, CodeNotFound, []string{ocitest.Prefix + "/echo", "1.0.0+build.7", "'_'"}},
		{Ref{Name: "nothing", Version: "1.0.0"}, CodeNotFound, []string{ocitest.Prefix + "/nothing"}},
		{Ref{Name: "gitx", Version: "0.3.1"}, CodeNoVariant, []string{"any platform", PlatformLinuxX86_64}},
		{Ref{Name: "gitx", Version: "0.3.1", Platform: PlatformDarwinAarch64}, CodeNoVariant, []string{PlatformDarwinAarch64, "only for " + PlatformLinuxX86_64}},
	}
	for _, mi := range misses {
		_, err := o.Fetch(ctx, mi.ref)
		e := assertCode(t, err, mi.code)
		for _, s := range mi.says {
			if !strings.Contains(e.Msg, s) {
				t.Errorf("Fetch %s: %q does not say %q", mi.ref, e.Msg, s)
			}
		}
	}

	got, err := o.List(ctx)
	must(t, err)
	want := []Listing{
		{Name: "dual", Version: "2.0.0", Implementation: "wasm", Role: manifest.RoleTool, Platforms: []string{PlatformLinuxX86_64, PlatformLinuxAarch64}, Description: "test tool"},
		{Name: "echo", Version: "1.0.0+build.7", Implementation: "wasm", Role: manifest.RoleTool, Description: "says it back", Tags: []string{"text", "demo"}},
		{Name: "gitx", Version: "0.3.1", Implementation: "native", Role: manifest.RoleTool, Platforms: []string{PlatformLinuxX86_64}},
		{Name: "style", Version: "1.0.0", Implementation: "static", Role: manifest.RoleSkill},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("List:\n got %+v\nwant %+v", got, want)
	}
}

// TestOCIRepublish proves publishing identical bytes again changes nothing, and different
// bytes under a published name, version and platform are refused naming both sha256s.
func TestOCIRepublish(t *testing.T) {
	reg := ocitest.Start(t)
	o := ociAt(t, reg.URL(), OpenOptions{})
	ctx := ociCtx(t)
	first, second := wasmArtifact("echo", "1.0.0", "one"), wasmArtifact("echo", "1.0.0", "two")
	_, err := o.Publish(ctx, first, "")
	must(t, err)
	repo, err := o.repository("echo")
	must(t, err)
	before, err := repo.Resolve(ctx, "1.0.0")
	must(t, err)
	b, err := o.Publish(ctx, first, "")
	must(t, err)
	if b.SHA256 != sha.Hex(first) {
		t.Fatalf("republish returned sha256 %s", b.SHA256)
	}
	after, err := repo.Resolve(ctx, "1.0.0")
	must(t, err)
	if before.Digest != after.Digest {
		t.Fatalf("an identical republish changed the manifest: %s → %s", before.Digest, after.Digest)
	}
	_, err = o.Publish(ctx, second, "")
	e := assertCode(t, err, CodeConflict)
	for _, s := range []string{sha.Hex(first), sha.Hex(second), "echo@1.0.0"} {
		if !strings.Contains(e.Msg, s) {
			t.Errorf("%q does not name %s", e.Msg, s)
		}
	}
	got, err := o.Fetch(ctx, Ref{Name: "echo", Version: "1.0.0"})
	must(t, err)
	if got.SHA256 != sha.Hex(first) {
		t.Fatal("the refused publication replaced the first")
	}
}

// TestOCITamperedBlob proves bytes altered in the registry's storage — flipped,
// lengthened or cut short — are refused with E-REG-033 naming the artifact, the digest
// the manifest states and, where all of them came, the digest of the bytes received.
func TestOCITamperedBlob(t *testing.T) {
	reg := ocitest.Start(t)
	o := ociAt(t, reg.URL(), OpenOptions{})
	ctx := ociCtx(t)
	for i, c := range []struct {
		name   string
		change func([]byte) []byte
		says   func(bad []byte) []string
	}{
		{"a byte flipped", func(b []byte) []byte { b = bytes.Clone(b); b[len(b)/2] ^= 0xff; return b },
			func(bad []byte) []string { return []string{"sha256 " + sha.Hex(bad)} }},
		{"a byte added", func(b []byte) []byte { return append(bytes.Clone(b), 0) },
			func([]byte) []string { return []string{"more than"} }},
		{"cut short", func(b []byte) []byte { return bytes.Clone(b[:len(b)-10]) },
			func(bad []byte) []string { return []string{"sha256 " + sha.Hex(bad)} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("tampered-%d", i)
			data := wasmArtifact(name, "1.0.0", c.name)
			_, err := o.Publish(ctx, data, "")
			must(t, err)
			sum := sha.Hex(data)
			file := filepath.Join(reg.Storage, "docker", "registry", "v2", "blobs", "sha256", sum[:2], sum, "data")
			bad := c.change(data)
			must(t, os.WriteFile(file, bad, 0o644))
			_, err = o.Fetch(ctx, Ref{Name: name, Version: "1.0.0"})
			e := assertCode(t, err, CodeHashMismatch)
			for _, s := range append(c.says(bad), name+"@1.0.0", ocitest.Prefix+"/"+name, sum) {
				if !strings.Contains(e.Msg, s) {
					t.Errorf("%q does not say %q", e.Msg, s)
				}
			}
		})
	}
}

// pushWasmComponent pushes wasm as a CNCF Wasm OCI artifact (wasm config, one
// application/wasm layer) under tag, as wasm tooling does, with oras-go.
func pushWasmComponent(t *testing.T, reg *ocitest.Registry, name, tag string, wasm []byte, description string) {
	t.Helper()
	ctx := ociCtx(t)
	repo, err := remote.NewRepository(reg.Addr + "/" + ocitest.Prefix + "/" + name)
	must(t, err)
	repo.PlainHTTP = true
	layer := ocispec.Descriptor{MediaType: WasmLayerMediaType, Digest: digest.FromBytes(wasm), Size: int64(len(wasm))}
	cfgJSON := []byte(fmt.Sprintf(`{"architecture":"wasm","os":"wasip2","layerDigests":[%q],"component":{"exports":[],"imports":[]}}`, layer.Digest))
	cfg := ocispec.Descriptor{MediaType: WasmConfigMediaType, Digest: digest.FromBytes(cfgJSON), Size: int64(len(cfgJSON))}
	must(t, repo.Push(ctx, layer, bytes.NewReader(wasm)))
	must(t, repo.Push(ctx, cfg, bytes.NewReader(cfgJSON)))
	man := ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, Config: cfg, Layers: []ocispec.Descriptor{layer}}
	if description != "" {
		man.Annotations = map[string]string{ocispec.AnnotationDescription: description}
	}
	mb, err := json.Marshal(man)
	must(t, err)
	desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(mb), Size: int64(len(mb))}
	must(t, repo.PushReference(ctx, desc, bytes.NewReader(mb), tag))
}

// TestOCIWasmComponent proves a plain wasm component in the CNCF layout is fetched as a
// tool: its wasm bytes and their sha256, with a tool archive holding them; that List
// shows it; that the lock pins the wasm's own sha256; and that publishing over its tag
// is refused.
func TestOCIWasmComponent(t *testing.T) {
	reg := ocitest.Start(t)
	o := ociAt(t, reg.URL(), OpenOptions{})
	ctx := ociCtx(t)
	wasm := []byte(wasmMagic + "component body")
	pushWasmComponent(t, reg, "greeter", "0.2.0_rc.1", wasm, "greets people")

	b, err := o.Fetch(ctx, Ref{Name: "greeter", Version: "0.2.0+rc.1", Platform: PlatformLinuxX86_64})
	must(t, err)
	if !bytes.Equal(b.Data, wasm) || b.SHA256 != sha.Hex(wasm) || b.Platform != "" || b.Archive == nil {
		t.Fatalf("Fetch: %d bytes sha256 %s platform %q archive %v", len(b.Data), b.SHA256, b.Platform, b.Archive)
	}
	am := b.Archive.Manifest()
	if am.Name != "greeter" || am.Version != "0.2.0+rc.1" || am.Runtime != manifest.RoleTool || am.Implementation != manifest.ImplWasm {
		t.Fatalf("archive manifest: %+v", am)
	}
	payload, err := b.Archive.ReadFile(b.Archive.Payload().Path)
	must(t, err)
	if b.Archive.Payload() != (Payload{Kind: PayloadWasm, Path: "greeter.wasm"}) || !bytes.Equal(payload, wasm) {
		t.Fatalf("payload %+v: %q", b.Archive.Payload(), payload)
	}

	got, err := o.List(ctx)
	must(t, err)
	want := []Listing{{Name: "greeter", Version: "0.2.0+rc.1", Implementation: "wasm", Role: manifest.RoleTool, Description: "greets people"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("List: %+v", got)
	}

	dir := t.TempDir()
	mpath := filepath.Join(dir, "murmur.yaml")
	must(t, os.WriteFile(mpath, []byte("name: cap\nversion: 1.0.0\nartifacts:\n  - {name: greeter, version: 0.2.0+rc.1}\n"), 0o644))
	cm, err := manifest.Load(mpath)
	must(t, err)
	res, _, err := InstallLock(ctx, cm, Options{Registry: o, Platform: PlatformLinuxX86_64})
	must(t, err)
	if e := res.Lock.Entry("greeter"); e == nil || e.SHA256.Any != sha.Hex(wasm) {
		t.Fatalf("lock entry %+v, want sha256 any %s", e, sha.Hex(wasm))
	}

	_, err = o.Publish(ctx, wasmArtifact("greeter", "0.2.0+rc.1", "x"), "")
	e := assertCode(t, err, CodeConflict)
	if !strings.Contains(e.Msg, sha.Hex(wasm)) {
		t.Errorf("%q does not name the component's sha256", e.Msg)
	}
}

// TestOCIRegistryDown proves a stopped registry is E-REG-083 naming it, for Fetch,
// Publish and List, and that the same client works again once it is back.
func TestOCIRegistryDown(t *testing.T) {
	reg := ocitest.Start(t)
	o := ociAt(t, reg.URL(), OpenOptions{})
	ctx := ociCtx(t)
	data := wasmArtifact("echo", "1.0.0", "up")
	_, err := o.Publish(ctx, data, "")
	must(t, err)
	reg.Stop()
	for what, call := range map[string]func() error{
		"Fetch":   func() error { _, err := o.Fetch(ctx, Ref{Name: "echo", Version: "1.0.0"}); return err },
		"Publish": func() error { _, err := o.Publish(ctx, wasmArtifact("echo", "1.0.1", "down"), ""); return err },
		"List":    func() error { _, err := o.List(ctx); return err },
	} {
		e := assertCode(t, call(), CodeRemoteDown)
		if !strings.Contains(e.Msg, reg.URL()) {
			t.Errorf("%s: %q does not name the registry", what, e.Msg)
		}
	}
	reg.Restart()
	b, err := o.Fetch(ctx, Ref{Name: "echo", Version: "1.0.0"})
	must(t, err)
	if b.SHA256 != sha.Hex(data) {
		t.Fatal("Fetch after Restart returned other bytes")
	}
}

// TestOCITags proves versions map to tags ('+' written '_', -<platform> appended) and
// back, and a version that cannot be a tag is refused with E-REG-087 naming it and the
// rule, before anything is sent.
func TestOCITags(t *testing.T) {
	long := strings.Repeat("1", 120)
	for _, c := range []struct {
		version, platform, tag string
	}{
		{"1.0.0", "", "1.0.0"},
		{"1.0.0+build.5", "", "1.0.0_build.5"},
		{"1.0.0", PlatformLinuxX86_64, "1.0.0-linux-x86_64"},
		{"2.0.0-rc.1+x", PlatformDarwinAarch64, "2.0.0-rc.1_x-darwin-aarch64"},
		{"+meta", "", "_meta"},
		{long, "", long},
		{"1.0~rc1", "", ""},
		{"-1", "", ""},
		{long, PlatformLinuxX86_64, ""},
	} {
		tag, err := ociTag("echo", c.version, c.platform)
		if c.tag == "" {
			e := assertCode(t, err, CodeOCITag)
			if !strings.Contains(e.Msg, c.version) || !strings.Contains(e.Msg, ociTagRule) {
				t.Errorf("%q does not name the version and the rule", e.Msg)
			}
			continue
		}
		if err != nil || tag != c.tag {
			t.Errorf("ociTag(%q, %q) = %q, %v; want %q", c.version, c.platform, tag, err, c.tag)
			continue
		}
		if v, p, ok := splitOCITag(tag); !ok || v != c.version || p != c.platform {
			t.Errorf("splitOCITag(%q) = %q, %q, %v", tag, v, p, ok)
		}
	}

	// No registry listens here: the refusals come first.
	o := ociAt(t, "oci+http://127.0.0.1:1/capsules", OpenOptions{})
	_, err := o.Fetch(context.Background(), Ref{Name: "echo", Version: "1.0~rc1"})
	assertCode(t, err, CodeOCITag)
	_, err = o.Publish(context.Background(), wasmArtifact("echo", "1.0~rc1", "x"), "")
	assertCode(t, err, CodeOCITag)
	_, err = o.Publish(context.Background(), nativeArtifact("echo", "1.0.0", "x"), "")
	assertCode(t, err, CodePlatformNeeded)
	_, err = o.Publish(context.Background(), wasmArtifact("echo", "1.0.0", "x"), PlatformLinuxX86_64)
	assertCode(t, err, CodePlatformExtra)
	_, err = o.Publish(context.Background(), nativeArtifact("echo", "1.0.0", "x"), "plan9-mips")
	assertCode(t, err, CodePlatform)
}

// validOCIManifest is a manifest decodeOCIManifest accepts, as JSON-ready maps.
func validOCIManifest(wasm bool) map[string]any {
	layer := map[string]any{"mediaType": OCILayerMediaType, "digest": "sha256:" + strings.Repeat("ab", 32), "size": 10,
		"annotations": map[string]any{ocispec.AnnotationTitle: "echo-1.0.0.mur.zip"}}
	m := map[string]any{
		"schemaVersion": 2, "mediaType": ocispec.MediaTypeImageManifest, "artifactType": OCIArtifactType,
		"config":      map[string]any{"mediaType": ocispec.MediaTypeEmptyJSON, "digest": string(ocispec.DescriptorEmptyJSON.Digest), "size": 2},
		"layers":      []any{layer},
		"annotations": map[string]any{AnnotationName: "echo", AnnotationVersion: "1.0.0"},
	}
	if wasm {
		delete(m, "artifactType")
		m["annotations"] = map[string]any{ocispec.AnnotationDescription: "d"}
		m["config"] = map[string]any{"mediaType": WasmConfigMediaType, "digest": "sha256:" + strings.Repeat("cd", 32), "size": 100}
		layer["mediaType"] = WasmLayerMediaType
	}
	return m
}

func ociJSON(m map[string]any) []byte {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// TestDecodeOCIManifest proves what decodeOCIManifest accepts and that every way a
// manifest can be wrong is E-REG-085 saying what.
func TestDecodeOCIManifest(t *testing.T) {
	for _, c := range []struct {
		name string
		wasm bool
		edit func(m map[string]any)
		says string // "" = accepted
	}{
		{"ours", false, func(map[string]any) {}, ""},
		{"cncf wasm", true, func(map[string]any) {}, ""},
		{"cncf wasm with artifactType", true, func(m map[string]any) { m["artifactType"] = WasmConfigMediaType }, ""},
		{"schemaVersion 1", false, func(m map[string]any) { m["schemaVersion"] = 1 }, "schemaVersion 2"},
		{"no schemaVersion", false, func(m map[string]any) { delete(m, "schemaVersion") }, "schemaVersion 2"},
		{"an index", false, func(m map[string]any) { m["mediaType"] = ocispec.MediaTypeImageIndex }, "media type"},
		{"no media type", false, func(m map[string]any) { delete(m, "mediaType") }, "media type"},
		{"no config", false, func(m map[string]any) { delete(m, "config") }, "no config"},
		{"no layers", false, func(m map[string]any) { m["layers"] = []any{} }, "0 layers"},
		{"two layers", false, func(m map[string]any) { l := m["layers"].([]any); m["layers"] = append(l, l[0]) }, "2 layers"},
		{"unknown layer type", false, func(m map[string]any) { layer0(m)["mediaType"] = "application/x-tar" }, "application/x-tar"},
		{"ours with a wasm config", false, func(m map[string]any) { m["config"].(map[string]any)["mediaType"] = WasmConfigMediaType }, "config media type"},
		{"wasm layer, empty config", true, func(m map[string]any) { m["config"].(map[string]any)["mediaType"] = ocispec.MediaTypeEmptyJSON }, "config media type"},
		{"ours without artifactType", false, func(m map[string]any) { delete(m, "artifactType") }, "artifactType"},
		{"wasm with another artifactType", true, func(m map[string]any) { m["artifactType"] = "application/x" }, "artifactType"},
		{"sha512 layer", false, func(m map[string]any) { layer0(m)["digest"] = "sha512:" + strings.Repeat("ab", 64) }, "not a sha256"},
		{"upper-case hex", false, func(m map[string]any) { layer0(m)["digest"] = "sha256:" + strings.Repeat("AB", 32) }, "64 lowercase hex"},
		{"short hex", false, func(m map[string]any) { layer0(m)["digest"] = "sha256:abc" }, "64 lowercase hex"},
		{"no digest", false, func(m map[string]any) { delete(layer0(m), "digest") }, "not a sha256"},
		{"bad config digest", false, func(m map[string]any) { m["config"].(map[string]any)["digest"] = "md5:x" }, "config digest"},
		{"negative size", false, func(m map[string]any) { layer0(m)["size"] = -1 }, "size -1"},
		{"huge size", false, func(m map[string]any) { layer0(m)["size"] = MaxArchiveFileBytes + 1 }, "not between"},
		{"no size", false, func(m map[string]any) { delete(layer0(m), "size") }, "no size"},
		{"string size", false, func(m map[string]any) { layer0(m)["size"] = "10" }, "JSON"},
		{"no name annotation", false, func(m map[string]any) { delete(m["annotations"].(map[string]any), AnnotationName) }, AnnotationName},
		{"no annotations", false, func(m map[string]any) { delete(m, "annotations") }, AnnotationVersion},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := validOCIManifest(c.wasm)
			c.edit(m)
			got, err := decodeOCIManifest(ociJSON(m))
			if c.says == "" {
				must(t, err)
				if got.Wasm != c.wasm || got.SHA256 != strings.Repeat("ab", 32) || got.Size != 10 {
					t.Fatalf("decoded %+v", got)
				}
				if !c.wasm && (got.Title != "echo-1.0.0.mur.zip" || got.Annotations[AnnotationName] != "echo") {
					t.Fatalf("decoded %+v", got)
				}
				return
			}
			e := assertCode(t, err, CodeRemoteProtocol)
			if !strings.Contains(e.Msg, c.says) {
				t.Fatalf("%q does not say %q", e.Msg, c.says)
			}
		})
	}
	for _, junk := range [][]byte{nil, []byte("null"), []byte("[]"), []byte("{"), bytes.Repeat([]byte(" "), maxOCIManifestBytes+1)} {
		if _, err := decodeOCIManifest(junk); errs.Code(err) != CodeRemoteProtocol {
			t.Errorf("decodeOCIManifest(%.20q): %v", junk, err)
		}
	}
}

func layer0(m map[string]any) map[string]any { return m["layers"].([]any)[0].(map[string]any) }

// fakeOCI is a registry on 127.0.0.1 that asks for credentials (Basic, or Bearer with a
// realm on loopback) and then knows no manifest; or fails with status when set.
func fakeOCI(t *testing.T, scheme, want string, status int, body string) string {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status != 0 {
			w.WriteHeader(status)
			io.WriteString(w, body)
			return
		}
		if r.Header.Get("Authorization") != want {
			if scheme == "Basic" {
				w.Header().Set("Www-Authenticate", `Basic realm="test"`)
			} else {
				w.Header().Set("Www-Authenticate", `Bearer realm="`+srv.URL+`/token",service="test"`)
			}
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"errors":[{"code":"NAME_UNKNOWN","message":"repository name not known to registry"}]}`)
	}))
	t.Cleanup(srv.Close)
	return "oci+http://" + strings.TrimPrefix(srv.URL, "http://") + "/capsules"
}

// TestOCICredentials proves where credentials come from — a username and password, a
// token, the Docker credential config named, in $DOCKER_CONFIG or under $HOME — that a
// refusal is E-REG-084 naming the registry and the source without the secret, and that
// other answers map to E-REG-083 and E-REG-085.
func TestOCICredentials(t *testing.T) {
	const user, pass, token = "ci-user", "s3cret-pass-word", "s3cret-token-value"
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	dockerDir := t.TempDir()
	dockerConfig := func(host string) {
		cfg := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
		must(t, os.WriteFile(filepath.Join(dockerDir, "config.json"), []byte(cfg), 0o600))
	}
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	home := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(home, ".docker"), 0o755))
	for _, c := range []struct {
		name   string
		scheme string
		want   string // the Authorization the fake registry accepts
		opts   func(host string) OpenOptions
		code   string
		says   string
	}{
		{"basic", "Basic", basic, func(string) OpenOptions { return OpenOptions{Auth: Auth{Username: user, Password: pass}} }, CodeNotFound, ""},
		{"wrong password", "Basic", basic, func(string) OpenOptions { return OpenOptions{Auth: Auth{Username: user, Password: "nope-" + pass}} }, CodeRemoteAuth, "username and password given"},
		{"anonymous", "Basic", basic, func(string) OpenOptions { return OpenOptions{} }, CodeRemoteAuth, "no credentials"},
		{"token", "Bearer", "Bearer " + token, func(string) OpenOptions { return OpenOptions{Auth: Auth{Token: token}} }, CodeNotFound, ""},
		{"wrong token", "Bearer", "Bearer " + token, func(string) OpenOptions { return OpenOptions{Auth: Auth{Token: "x" + token}} }, CodeRemoteAuth, "token given"},
		{"docker config named", "Basic", basic, func(h string) OpenOptions {
			dockerConfig(h)
			return OpenOptions{Auth: Auth{DockerConfig: filepath.Join(dockerDir, "config.json")}}
		}, CodeNotFound, ""},
		{"$DOCKER_CONFIG", "Basic", basic, func(h string) OpenOptions {
			dockerConfig(h)
			return OpenOptions{Getenv: env("DOCKER_CONFIG", dockerDir, "HOME", home)}
		}, CodeNotFound, ""},
		{"$HOME without a config", "Basic", basic, func(string) OpenOptions { return OpenOptions{Getenv: env("HOME", home)} }, CodeRemoteAuth, filepath.Join(home, ".docker", "config.json")},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := fakeOCI(t, c.scheme, c.want, 0, "")
			src, err := ParseSource(spec)
			must(t, err)
			host, _, _ := strings.Cut(src.Base, "/")
			o := ociAt(t, spec, c.opts(host))
			_, err = o.Fetch(ociCtx(t), Ref{Name: "echo", Version: "1.0.0"})
			e := assertCode(t, err, c.code)
			if !strings.Contains(e.Msg, c.says) {
				t.Errorf("%q does not say %q", e.Msg, c.says)
			}
			if c.code == CodeRemoteAuth && !strings.Contains(e.Msg, spec) {
				t.Errorf("%q does not name the registry", e.Msg)
			}
			for _, secret := range []string{pass, token, strings.TrimPrefix(basic, "Basic ")} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("the error shows a secret: %v", err)
				}
			}
		})
	}

	t.Run("unreadable docker config", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "config.json")
		must(t, os.WriteFile(bad, []byte("{not json"), 0o600))
		src, err := ParseSource("oci+http://127.0.0.1:1/capsules")
		must(t, err)
		_, err = NewOCI(src, OpenOptions{Auth: Auth{DockerConfig: bad}, Getenv: noEnv})
		e := assertCode(t, err, CodeRemoteAuth)
		if !strings.Contains(e.Msg, bad) {
			t.Errorf("%q does not name the file", e.Msg)
		}
	})

	for _, c := range []struct {
		status int
		body   string
		code   string
	}{
		{http.StatusInternalServerError, "", CodeRemoteDown},
		{http.StatusServiceUnavailable, "", CodeRemoteDown},
		{http.StatusTooManyRequests, "", CodeRemoteDown},
		{http.StatusForbidden, `{"errors":[{"code":"DENIED"}]}`, CodeRemoteAuth},
		{http.StatusBadRequest, "", CodeRemoteProtocol},
		{http.StatusOK, `{"schemaVersion":2}`, CodeRemoteProtocol},
	} {
		t.Run(fmt.Sprint("HTTP ", c.status), func(t *testing.T) {
			o := ociAt(t, fakeOCI(t, "", "", c.status, c.body), OpenOptions{})
			_, err := o.Fetch(ociCtx(t), Ref{Name: "echo", Version: "1.0.0"})
			assertCode(t, err, c.code)
		})
	}
}
