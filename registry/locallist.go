package registry

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/capsulegate/capsulegate/manifest"
)

// List lists every published version of every artifact, from the .meta.json files
// beside the archives, by name then version in natural order. A version whose metadata
// cannot be read is listed from its folder alone.
func (l *Local) List(ctx context.Context) ([]Listing, error) {
	names, err := os.ReadDir(l.Root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, l.storeErr(err, "cannot list its artifacts")
	}
	var out []Listing
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !n.IsDir() || !manifest.ValidName(n.Name()) {
			continue
		}
		vers, err := l.Versions(n.Name())
		if err != nil {
			return nil, err
		}
		for _, v := range vers {
			out = append(out, l.listing(n.Name(), v))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// listing describes name@version from its metadata files.
func (l *Local) listing(name, version string) Listing {
	li := Listing{Name: name, Version: version, Platforms: l.platformsOf(name, version)}
	plats := append([]string{""}, li.Platforms...)
	for _, p := range plats {
		data, err := readCapped(filepath.Join(l.Root, name, version, fileBase(name, version, p)+".meta.json"), 1<<20)
		if err != nil {
			continue
		}
		var m Meta
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		li.Role, li.Description, li.Tags = m.Runtime, m.Description, m.Tags
		if p == "" {
			li.SHA256 = m.SHA256
		}
		li.Implementation = m.Implementation
		if li.Implementation == "" {
			li.Implementation = "wasm"
			if m.Runtime == manifest.RoleSkill {
				li.Implementation = "static"
			}
		}
		break
	}
	return li
}
