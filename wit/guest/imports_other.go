//go:build !wasip1

package guest

// Outside wasip1 the imports exist so that the package builds and documents on the host:
// the ones with an error return ErrNotGuest, the others panic with it.

// Invoke calls the tool name through murmur:tool-registry/invoke.
func Invoke(name string, in ToolInput) (ToolResult, error) { return ToolResult{}, ErrNotGuest }

// HTTPSend sends req through capsulegate:http/outgoing.
func HTTPSend(req HTTPRequest) (HTTPResponse, error) { return HTTPResponse{}, ErrNotGuest }

// HTTPOpen sends req through capsulegate:http/outgoing@0.2.0, its body read as it arrives.
func HTTPOpen(req HTTPRequest) (HTTPStream, error) { return HTTPStream{}, ErrNotGuest }

// Read reads the bytes of the body that have arrived.
func (b *HTTPBody) Read(p []byte) (int, error) { return 0, ErrNotGuest }

// Close releases the body.
func (b *HTTPBody) Close() error { return nil }

// EmitChunk streams a piece of the answer through murmur:stream/events.
func EmitChunk(chunk string) { panic(ErrNotGuest) }

// EmitThinkingChunk streams a piece of reasoning through murmur:stream/events.
func EmitThinkingChunk(chunk string) { panic(ErrNotGuest) }

// ToolCallStarted reports that the model started the tool call id to tool name.
func ToolCallStarted(id, name string) { panic(ErrNotGuest) }

// ToolCallInputBytes reports how many input bytes of call id have streamed so far.
func ToolCallInputBytes(id string, n uint64) { panic(ErrNotGuest) }

// RequestInput asks the task's user for input through murmur:task/task.
func RequestInput(prompt string) string { panic(ErrNotGuest) }
