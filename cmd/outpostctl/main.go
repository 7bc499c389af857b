// Command outpostctl manages a running outpostd (see appliance/ctl).
package main

import (
	"os"

	"github.com/outpost/outpost/appliance/ctl"
)

func main() { os.Exit(ctl.Main(os.Args[1:], os.Stdout, os.Stderr)) }
