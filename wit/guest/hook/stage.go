package hook

// CaseWriteManifests is the answer of an on-stage hook with commit_policy
// write-manifests: tool manifests describing shell binaries to the model.
const CaseWriteManifests = "write-manifests"

// StageEvent is murmur:hook's stage-event, handed to on-stage once per staging of the
// capsule, before any session.
type StageEvent struct {
	// ShellAllow is the capsule's capabilities.shell.allow, in manifest order.
	ShellAllow []string `json:"shell_allow"`
}

// ToolManifest is murmur:hook's tool-manifest: Content is the murmur.yaml of a tool
// named BinaryName, whose description and input_schema the model is shown for that
// shell binary.
type ToolManifest struct {
	BinaryName string `json:"binary_name"`
	Content    string `json:"content"`
}

// WriteManifests answers on-stage with tool manifests for shell binaries; the host
// honours it only from a hook bound to on-stage with commit_policy write-manifests.
func WriteManifests(m ...ToolManifest) Output {
	return Output{Case: CaseWriteManifests, Manifests: m}
}
