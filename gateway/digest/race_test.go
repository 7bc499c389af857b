//go:build race

package digest

const raceEnabled = true
