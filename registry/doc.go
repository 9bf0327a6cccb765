// Package registry turns artifacts into bytes and back (docs/reference/archive.md,
// docs/reference/lock.md): it opens and packs .mur.zip archives, stores and serves them
// from a local registry directory, and — in lock.go and resolve.go — pins and resolves
// what a capsule uses.
//
// Archives are hostile until proven otherwise. OpenArchive checks every header and
// decompresses every entry once in memory, counting bytes and checking CRCs, before
// anything can reach the disk; ExtractTo then writes into a fresh folder beside the
// target and renames it into place, so a refused or failed extraction leaves nothing.
//
// Decisions:
//
//   - Entry names must be clean relative slash paths of valid UTF-8 without control
//     characters, at most 1024 bytes, no segment over 255 bytes. Two names that are equal
//     after Unicode simple case folding are duplicates (macOS and Windows file systems
//     would merge them), and a name may not be both a file and a folder. Names equal
//     only after Unicode normalization are not detected up front; extraction creates
//     files with O_EXCL, so such a pair fails the extraction cleanly on macOS.
//   - Only Store and Deflate entries are accepted; encrypted entries are refused. The
//     central directory is authoritative; local headers only locate the data.
//   - Caps: 10 000 entries and 500 MiB decompressed in total, declared and actual
//     (WithMaxEntries, WithMaxBytes). An entry that inflates past its declared size is a
//     lying header and is refused at once.
//   - Payload: wasm roles use capsule.wasm if present, else exactly one root *.wasm
//     (suffix matched exactly); native tools bin/<name>; skills skill.md (any case).
//   - Pack adds directory entries, a fixed 1980-01-01 UTC time, mode 0755 for files in
//     bin/ and directories, 0644 otherwise, whatever the source modes are. It skips only
//     .git folders and .DS_Store files; symlinks and special files are refused.
//   - The local registry's .sha256 holds "<hex>  <file>\n" (sha256sum format, so
//     `sha256sum -c` works); readers take the first field, which must be 64 lowercase hex
//     characters. A version folder counts as published once its .mur.zip exists: the zip
//     is written last. Publishers serialize on an flock of the version folder.
//   - Versions lists versions in natural order (digit runs compare as numbers); an
//     unknown name has no versions, not an error. Fetch checks the bytes against the
//     .sha256 only; opening the archive is the caller's step. Fetch without a platform
//     accepts only the platform-independent file. A version may hold a platform-
//     independent (wasm) build beside native ones; the native file wins on its platform.
//   - Names and versions are checked again here, whatever the manifest parser did,
//     because paths are built from them: names [a-z0-9-] 1–100, versions 1–128 of
//     [A-Za-z0-9.+_~-], not starting with '.', not latest/stable/edge.
package registry
