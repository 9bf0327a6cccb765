package manifest

// Stable codes of the manifest and capability refusals (docs/errors.md lists them all).
const (
	CodeSyntax           = "E-MAN-001" // not YAML, empty, unreadable
	CodeType             = "E-MAN-002" // a value of the wrong type
	CodeMissing          = "E-MAN-003" // a required key is missing or empty
	CodeName             = "E-MAN-004" // a capsule or artifact name breaks the naming rule
	CodeReservedVersion  = "E-MAN-005" // version is latest, stable or edge
	CodeEnum             = "E-MAN-006" // a value not among the allowed words
	CodeDuplicateKey     = "E-MAN-007" // a key written twice in one mapping
	CodeUnsetEnv         = "E-MAN-008" // ${NAME} names an unset host variable
	CodeInterpSyntax     = "E-MAN-009" // ${…} malformed or not UPPER_SNAKE_CASE
	CodeDuplicateArt     = "E-MAN-010" // two artifacts share a name
	CodeVersion          = "E-MAN-011" // artifact version missing or not usable
	CodeSourceRole       = "E-MAN-012" // source on a non-skill artifact, or source+version
	CodeGatewayRole      = "E-MAN-013" // gateway on a non-driver artifact
	CodeDriverRef        = "E-MAN-014" // inference.driver.artifact names no declared driver
	CodePromptSources    = "E-MAN-015" // more than one system prompt source
	CodeEndpointConflict = "E-MAN-016" // inference.endpoint/api_key disagree with the driver's gateway
	CodeRange            = "E-MAN-017" // a number out of its range
	CodeModel            = "E-MAN-019" // inference.model missing for http transport
	CodePromptArtifact   = "E-MAN-020" // system_prompt_artifact names no skill artifact
	CodeSourcePath       = "E-MAN-021" // source or system_prompt_file path unusable
	CodeTooLarge         = "E-MAN-022" // file or alias expansion too large
	CodeURL              = "E-MAN-023" // an endpoint that is not an http(s) URL
	CodeSourceMissing    = "E-MAN-024" // a local skill source or prompt file not found at stage
	CodeUpstreamAuth     = "E-MAN-025" // a driver's upstream_auth header or value template malformed
	CodeHookPairing      = "E-MAN-026" // hook keys on a non-hook, or a binding/mode/policy pairing refused
	CodeHookGrants       = "E-MAN-027" // capabilities on a non-hook entry, or a hook grant wider than the capsule's
	CodeHarnessPath      = "E-MAN-028" // a capabilities.harness.paths path that is not absolute and clean
	CodeSnapshotRole     = "E-MAN-029" // init_snapshot on a skill, which runs no guest
	CodeMediaType        = "E-MAN-030" // an a2a media type that is not type/subtype
	CodeOutputFile       = "E-MAN-031" // an a2a output file that is not a clean name below out/, or listed twice
	CodeInstallPattern   = "E-MAN-032" // a capabilities.install entry that is not a name, a 'prefix*' or '*'
	CodePeer             = "E-MAN-033" // a peer whose name repeats, or whose url is not an A2A endpoint URL
	CodePeerNotAllowed   = "E-MAN-034" // a peer url that capabilities.network.allow does not grant

	CodeUnknownKey = "W-MAN-001" // unknown key (warning)

	CodeCredentialEnv = "E-CAP-001" // env.allow names a credential-shaped variable
	CodeEnvName       = "E-CAP-002" // env.allow entry is not a variable name
	CodeScope         = "E-CAP-003" // filesystem.scope absolute, with .., or empty
	CodeShellName     = "E-CAP-004" // shell.allow entry is a path, not a bare name
	CodeShellEmpty    = "E-CAP-005" // shell.allow written as an empty list
	CodeLimit         = "E-CAP-006" // a limit or resource ≤ 0
	CodeStripGlob     = "E-CAP-007" // shell.strip_env glob malformed
	CodeMinTier       = "E-CAP-008" // shell.min_tier is not a sandbox tier
)
