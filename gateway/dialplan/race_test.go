//go:build race

package dialplan

const raceEnabled = true
