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

// Stable codes of the registry's refusals (docs/errors.md). Every refusal is an
// *errs.Error with Part "registry".
const (
	CodeNotZip          = "E-REG-001" // the bytes are not a readable zip archive
	CodeTooManyEntries  = "E-REG-002" // more entries than the cap (10 000 by default)
	CodeAbsoluteName    = "E-REG-003" // an entry name is absolute (/x, C:\x, \\host)
	CodeDotDot          = "E-REG-004" // an entry name has a .. segment
	CodeBackslash       = "E-REG-005" // an entry name holds a backslash
	CodeBadName         = "E-REG-006" // an entry name is empty, not clean, too long or not printable UTF-8
	CodeSymlink         = "E-REG-007" // a symlink entry
	CodeSpecialEntry    = "E-REG-008" // an entry neither a regular file nor a plain folder
	CodeDuplicate       = "E-REG-009" // two entries share a name (exactly or ignoring case)
	CodePathConflict    = "E-REG-010" // a name is used both as a file and as a folder
	CodeCompression     = "E-REG-011" // a compression method other than store or deflate
	CodeEncrypted       = "E-REG-012" // an encrypted entry
	CodeDeclaredSize    = "E-REG-013" // declared (or packed, or file) size over the limit
	CodeActualSize      = "E-REG-014" // an entry inflates past its declared size or the limit
	CodeCorrupt         = "E-REG-015" // entry data truncated, undecodable or failing its CRC
	CodeNoManifest      = "E-REG-016" // no murmur.yaml at the root
	CodeArtifactName    = "E-REG-017" // an artifact name breaks the naming rule
	CodeArtifactVersion = "E-REG-018" // a version is empty, reserved or unusable as a path segment
	CodeArtifactKind    = "E-REG-019" // runtime/implementation not a known combination
	CodeNoPayload       = "E-REG-020" // the payload the role needs is missing
	CodeManyPayloads    = "E-REG-021" // several root *.wasm and no capsule.wasm
	CodeNoSuchFile      = "E-REG-022" // ReadFile of a name the archive does not hold
	CodeTargetNotEmpty  = "E-REG-023" // extraction target exists and is not an empty folder
	CodeExtract         = "E-REG-024" // extraction failed writing to disk
	CodePackSource      = "E-REG-025" // the folder to pack is missing or unreadable
	CodePackSymlink     = "E-REG-026" // the folder to pack holds a symlink
	CodePackSpecial     = "E-REG-027" // the folder to pack holds a device, socket or pipe
	CodePlatform        = "E-REG-028" // an unknown platform
	CodePlatformNeeded  = "E-REG-029" // a native artifact published without a platform
	CodePlatformExtra   = "E-REG-030" // a platform given for a wasm or skill artifact
	CodeNotFound        = "E-REG-031" // no such artifact or version in the registry
	CodeNoVariant       = "E-REG-032" // the version exists, but not for this platform
	CodeHashMismatch    = "E-REG-033" // bytes differ from the registry's own .sha256
	CodeHashFile        = "E-REG-034" // the .sha256 beside an archive is missing or malformed
	CodeConflict        = "E-REG-035" // a different archive is already published under that name and version
	CodeStore           = "E-REG-036" // the registry directory cannot be read or written
)
