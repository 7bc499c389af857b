// Command docgen writes docs/config-reference.md and
// docs/schema/outpost-config.schema.json from the config package; run it
// with go generate ./appliance/config/... (it expects that package's
// directory as its working directory).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/outpost/outpost/appliance/config/internal/docgen"
)

func main() {
	ref, schema, err := docgen.Generate(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
	for _, f := range []struct {
		path string
		data []byte
	}{{docgen.ReferencePath, ref}, {docgen.SchemaPath, schema}} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "docgen:", err)
			os.Exit(1)
		}
		if err := os.WriteFile(f.path, f.data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "docgen:", err)
			os.Exit(1)
		}
	}
}
