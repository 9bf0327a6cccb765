package escape

type bridgeFixture struct{}

func mcpBridgeRows() []row { return nil }
