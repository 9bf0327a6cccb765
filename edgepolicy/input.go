package edgepolicy

import (
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/interpreter"
)

// Input is what a policy sees of one request.
type Input struct {
	Principal     string         // "" for an anonymous caller
	Authenticated bool           // whether the caller authenticated at all
	Scheme        string         // how the caller authenticated: "bearer", "jwt", "mtls", "front" (a Caddy handler in front), "" anonymous
	Claims        map[string]any // the JWT's claims or certificate fields; nil → empty map
	Method        string         // the A2A 1.0 method name whatever the binding/version: SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask, CreateTaskPushNotificationConfig, GetTaskPushNotificationConfig, ListTaskPushNotificationConfigs, DeleteTaskPushNotificationConfig, GetExtendedAgentCard
	Binding       string         // "jsonrpc", "http+json", "grpc"
	Version       string         // "0.3" or "1.0"
	Capsule       string         // the capsule's name
	Skill         string         // the skill the message asks for ("" when none)
	Metadata      map[string]any // the message's metadata; nil → empty map
	TaskID        string         // the task the request names ("" when none)
}

// activation is Input seen as a CEL activation. It is a conversion of *Input, not a
// wrapper, so handing one to Eval allocates nothing. Strings are returned as CEL values
// already, which spares the adapter a second conversion; the maps are handed over as
// they are, and CEL adapts only what the expression reads of them.
type activation Input

// emptyMap stands in for a nil Claims or Metadata. It is never written to.
var emptyMap = map[string]any{}

// zeroInput is what a nil *Input evaluates as: an anonymous caller naming nothing.
var zeroInput Input

// ResolveName returns the value of a declared variable.
func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "principal":
		return types.String(a.Principal), true
	case "authenticated":
		return types.Bool(a.Authenticated), true
	case "scheme":
		return types.String(a.Scheme), true
	case "claims":
		if a.Claims == nil {
			return emptyMap, true
		}
		return a.Claims, true
	case "method":
		return types.String(a.Method), true
	case "binding":
		return types.String(a.Binding), true
	case "version":
		return types.String(a.Version), true
	case "capsule":
		return types.String(a.Capsule), true
	case "skill":
		return types.String(a.Skill), true
	case "metadata":
		if a.Metadata == nil {
			return emptyMap, true
		}
		return a.Metadata, true
	case "task_id":
		return types.String(a.TaskID), true
	}
	return nil, false
}

// Parent returns nil: the request's variables are the whole scope.
func (a *activation) Parent() interpreter.Activation { return nil }

// activate returns in as an activation; a nil in is an anonymous caller.
func activate(in *Input) *activation {
	if in == nil {
		return (*activation)(&zeroInput)
	}
	return (*activation)(in)
}
