//go:build race

package escape

func init() { raceEnabled = true }
