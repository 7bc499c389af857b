package appliance

import "github.com/outpost/outpost/appliance/api"

// Firmware is the A/B updater the API serves at /api/v1/firmware (nil:
// this host has no A/B layout; the API then answers 404).
func (a *App) Firmware() api.Firmware { return a.opts.Firmware }
