//go:build !unix

package ctl

import "os"

// winsizeCols is 0: outside Unix, $COLUMNS or 80 decide.
func winsizeCols(*os.File) int { return 0 }
