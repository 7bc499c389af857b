package voicemail

import (
	"embed"
	"path"
)

//go:generate sh -c "cd prompts && go run gen.go"

//go:embed prompts/*.ulaw
var prompts embed.FS

// prompt is a shipped prompt's µ-law samples (nil when there is no such
// prompt: a name is a constant of this package, checked by its tests).
func prompt(name string) []byte {
	b, _ := prompts.ReadFile(path.Join("prompts", name+".ulaw"))
	return b
}
