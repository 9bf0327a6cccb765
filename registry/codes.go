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

// Codes of remote registries and the cache (docs/operators.md "Registries").
const (
	CodeRemote         = "E-REG-080" // a registry URL this release does not serve, or plain HTTP off loopback
	CodeRemoteDown     = "E-REG-083" // a remote registry cannot be reached or answered 5xx
	CodeRemoteAuth     = "E-REG-084" // a remote registry refused the credentials (401/403)
	CodeRemoteProtocol = "E-REG-085" // a remote registry's answer is malformed (listing, manifest, missing header)
	CodeReserved       = "E-REG-086" // a remote registry refused a reserved version (Nexus 422)
	CodeOCITag         = "E-REG-087" // a version that cannot be an OCI tag
	CodeCache          = "E-REG-088" // the artifact cache folder cannot be read or written
	CodeServe          = "E-REG-089" // the capsule_registry handler's configuration is wrong
	WarnCache          = "W-REG-001" // a verified archive could not be kept in the artifact cache
)

// Codes of resolve-level refusals.
const (
	CodeIdentity     = "E-REG-090" // the archive's own manifest names another artifact or version
	CodeRole         = "E-REG-091" // the archive's runtime differs from the capsule manifest's
	CodePullDigest   = "E-REG-092" // a runtime pull's bytes differ from the trust policy's pin or the registry's own statement
	CodePullUnstated = "E-REG-093" // a runtime pull from a registry that states no digest, and no pin in the trust policy
	CodeUnclassified = "E-REG-099" // a Registry implementation returned an error without a code
)

// Stable codes of lock refusals (docs/errors.md).
const (
	CodeLockV1          = "E-LOCK-001" // lock_version 1 file
	CodeLockMalformed   = "E-LOCK-002" // not a valid lock file
	CodeLockVersion     = "E-LOCK-003" // lock_version neither 1 nor 2
	CodeLockMissing     = "E-LOCK-004" // a manifest artifact has no lock entry
	CodeLockVersionPin  = "E-LOCK-005" // manifest version differs from the pinned one
	CodeLockHash        = "E-LOCK-006" // bytes differ from the pinned sha256
	CodeLockPlatform    = "E-LOCK-007" // no pin for this platform
	CodeLockWrite       = "E-LOCK-008" // the lock could not be written
	CodeLockEntry       = "E-LOCK-009" // an entry is invalid (hash format, duplicate)
	CodeLockFileMissing = "E-LOCK-010" // verify needs a lock and there is none
)
