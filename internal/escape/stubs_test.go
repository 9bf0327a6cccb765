package escape

type sandboxFixture struct{}
type a2aFixture struct{}

func shellRows() []row  { return nil }
func nativeRows() []row { return nil }
func a2aRows() []row    { return nil }
