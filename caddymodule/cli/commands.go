package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/atomicfile"
	"github.com/capsulegate/capsulegate/internal/digest"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
)

// artifactJSON is one artifact in --json output of install and verify.
type artifactJSON struct {
	Name     string `json:"name"`
	Version  string `json:"version,omitempty"`
	Runtime  string `json:"runtime"`
	Platform string `json:"platform"`
	SHA256   string `json:"sha256"`
	Bytes    int    `json:"bytes"`
	Source   string `json:"source,omitempty"`
}

func artifactsJSON(res *registry.Resolution) []artifactJSON {
	out := make([]artifactJSON, 0, len(res.Artifacts))
	for _, a := range res.Artifacts {
		j := artifactJSON{Name: a.Name, Version: a.Version, Runtime: string(a.Role), Platform: a.Platform, SHA256: a.SHA256, Bytes: len(a.Data), Source: a.Source}
		if j.Platform == "" {
			j.Platform = "any"
		}
		if a.Source != "" {
			j.Bytes = len(a.Text)
		}
		out = append(out, j)
	}
	return out
}

// prepare loads the capsule manifest (printing its warnings) and the resolve options
// for the chosen registry, with progress reported on stderr.
func (e *Env) prepare(c Common, path string, mopts ...manifest.Option) (*manifest.Manifest, registry.Options, error) {
	m, err := manifest.Load(path, mopts...)
	if err != nil {
		return nil, registry.Options{}, err
	}
	e.warn(m.Warnings)
	reg, _, err := e.OpenRegistry(c.Registry, true)
	if err != nil {
		return nil, registry.Options{}, err
	}
	e.progress = newProgress(e)
	return m, registry.Options{Registry: reg, Progress: e.progress.report}, nil
}

// Install resolves a capsule's artifacts and writes murmur.lock beside its manifest.
func Install(ctx context.Context, e *Env, c Common, manifestPath string) int {
	// Pinning never talks to a model: a CI job that pins needs no production key.
	m, opts, err := e.prepare(c, manifestPath, manifest.WithoutGatewayKeys())
	if err != nil {
		return e.fail(c, err)
	}
	res, changed, err := registry.InstallLock(ctx, m, opts)
	e.progress.done()
	if err != nil {
		return e.fail(c, err)
	}
	lockPath := registry.LockPath(m.File)
	if c.JSON {
		e.writeJSON(map[string]any{"ok": true, "capsule": m.Name, "version": m.Version, "lock": lockPath,
			"lock_changed": changed, "artifacts": artifactsJSON(res)})
		return ExitOK
	}
	switch {
	case changed:
		fmt.Fprintf(e.Stdout, "installed %s %s: %d artifacts, lock written to %s\n", m.Name, m.Version, len(res.Artifacts), lockPath)
	case len(res.Lock.Artifacts) == 0 && !fileExists(lockPath):
		fmt.Fprintf(e.Stdout, "installed %s %s: %d artifacts, none from a registry, so no lock is needed\n", m.Name, m.Version, len(res.Artifacts))
	default:
		fmt.Fprintf(e.Stdout, "installed %s %s: %d artifacts, lock %s already up to date\n", m.Name, m.Version, len(res.Artifacts), lockPath)
	}
	return ExitOK
}

// Verify checks a capsule's artifacts against its lock and the registry; it writes nothing.
func Verify(ctx context.Context, e *Env, c Common, manifestPath string) int {
	m, opts, err := e.prepare(c, manifestPath, manifest.WithoutGatewayKeys())
	if err != nil {
		return e.fail(c, err)
	}
	res, err := registry.VerifyLock(ctx, m, opts)
	e.progress.done()
	if err != nil {
		return e.fail(c, err)
	}
	if c.JSON {
		e.writeJSON(map[string]any{"ok": true, "capsule": m.Name, "version": m.Version, "lock": registry.LockPath(m.File),
			"artifacts": artifactsJSON(res)})
		return ExitOK
	}
	fmt.Fprintf(e.Stdout, "verified %s %s: %d artifacts match the lock and the registry\n", m.Name, m.Version, len(res.Artifacts))
	return ExitOK
}

// Pack builds a .mur.zip from an artifact folder; output "" means
// ./<name>-<version>.mur.zip in the current folder.
func Pack(ctx context.Context, e *Env, c Common, dir, output string) int {
	data, am, err := registry.Pack(dir)
	if err != nil {
		return e.fail(c, err)
	}
	if output == "" {
		output = am.Name + "-" + am.Version + ".mur.zip"
	}
	if err := atomicfile.Write(output, data, 0o644); err != nil {
		return e.fail(c, errs.Wrap(err, CodeOutput, "registry", "cannot write "+output, "check that its folder exists and is writable"))
	}
	sum := digest.Hex(data)
	if c.JSON {
		e.writeJSON(map[string]any{"ok": true, "name": am.Name, "version": am.Version, "runtime": am.Runtime,
			"output": output, "sha256": sum, "bytes": len(data)})
		return ExitOK
	}
	fmt.Fprintf(e.Stdout, "packed %s %s (%s) → %s  sha256:%s  %s\n", am.Name, am.Version, am.Runtime, output, sum, humanBytes(len(data)))
	return ExitOK
}

// Publish adds a .mur.zip to the registry (a folder, OCI or Nexus); platform is
// required for native artifacts.
func Publish(ctx context.Context, e *Env, c Common, file, platform string) int {
	reg, src, err := e.OpenRegistry(c.Registry, false)
	if err != nil {
		return e.fail(c, err)
	}
	data, err := readArchiveFile(file)
	if err != nil {
		return e.fail(c, err)
	}
	where := src.Spec
	if !src.Remote() {
		if err := os.MkdirAll(src.Dir, 0o755); err != nil {
			return e.fail(c, errs.Wrap(err, registry.CodeStore, "registry", "cannot create the registry folder "+src.Dir, "check the path and its permissions"))
		}
	}
	pub, ok := reg.(registry.Publisher)
	if !ok {
		return e.fail(c, errs.New(registry.CodeRemote, "registry", fmt.Sprintf("registry %s does not take publications", src.Spec), "publish to a folder, an OCI or a Nexus registry"))
	}
	blob, err := pub.Publish(ctx, data, platform)
	if err != nil {
		return e.fail(c, err)
	}
	plat := blob.Platform
	if plat == "" {
		plat = "any"
	}
	if c.JSON {
		e.writeJSON(map[string]any{"ok": true, "name": blob.Name, "version": blob.Version, "platform": plat,
			"sha256": blob.SHA256, "bytes": len(blob.Data), "registry": where})
		return ExitOK
	}
	if !src.Remote() {
		where = filepath.Join(src.Dir, blob.Name, blob.Version)
	}
	fmt.Fprintf(e.Stdout, "published %s %s (%s) to %s  sha256:%s\n", blob.Name, blob.Version, plat, where, blob.SHA256)
	return ExitOK
}

// Search lists the registry's artifacts whose name, description or tags hold every word
// of query (all of them for an empty query), newest version last.
func Search(ctx context.Context, e *Env, c Common, query string) int {
	reg, src, err := e.OpenRegistry(c.Registry, false)
	if err != nil {
		return e.fail(c, err)
	}
	l, ok := reg.(registry.Lister)
	if !ok {
		return e.fail(c, errs.New(registry.CodeRemote, "registry", fmt.Sprintf("registry %s cannot list what it holds", src.Spec), "search a folder, an OCI or a Nexus registry"))
	}
	all, err := l.List(ctx)
	if err != nil {
		return e.fail(c, err)
	}
	found := []registry.Listing{}
	for _, a := range all {
		if a.Matches(query) {
			found = append(found, a)
		}
	}
	if c.JSON {
		e.writeJSON(map[string]any{"ok": true, "registry": src.Spec, "query": query, "artifacts": found})
		return ExitOK
	}
	if len(found) == 0 {
		fmt.Fprintf(e.Stdout, "no artifact in %s matches %q\n", src.Spec, query)
		return ExitOK
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tRUNTIME\tPLATFORMS\tDESCRIPTION")
	for _, a := range found {
		plats := "any"
		if len(a.Platforms) > 0 {
			plats = strings.Join(a.Platforms, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s/%s\t%s\t%s\n", registry.PrintableText(a.Name), registry.PrintableText(a.Version), registry.PrintableText(string(a.Role)),
			registry.PrintableText(a.Implementation), registry.PrintableText(plats), registry.PrintableText(a.Description))
	}
	tw.Flush()
	return ExitOK
}

// readArchiveFile reads a .mur.zip, refusing one larger than any acceptable archive.
func readArchiveFile(file string) ([]byte, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, errs.Wrap(err, CodeArchiveRead, "registry", "cannot read "+file, "check the path")
	}
	if fi.Size() > registry.MaxArchiveFileBytes {
		return nil, errs.New(CodeArchiveRead, "registry", fmt.Sprintf("%s is %d bytes, over the %d-byte archive limit", file, fi.Size(), registry.MaxArchiveFileBytes), "ship a smaller artifact")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, errs.Wrap(err, CodeArchiveRead, "registry", "cannot read "+file, "check the path and its permissions")
	}
	return data, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
