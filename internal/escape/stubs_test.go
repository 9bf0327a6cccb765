package escape

type sandboxFixture struct{}
type netFixture struct{}
type dnsFixture struct{}
type a2aFixture struct{}

func shellRows() []row   { return nil }
func nativeRows() []row  { return nil }
func networkRows() []row { return nil }
func dnsRows() []row     { return nil }
func a2aRows() []row     { return nil }
