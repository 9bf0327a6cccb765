//go:build race

package murmur

func init() { raceEnabled = true }
