// Package firmware is the box's side of the A/B update (images/layout):
// it installs a signed bundle into the inactive root slot, arranges one
// trial boot of it in the GRUB environment block on the ESP, and commits
// the slot once outpostd is healthy.
//
// Install refuses, with nothing written to a slot or to the boot
// environment, a bundle whose manifest signature does not verify with the
// key baked into the running image, that targets another architecture or
// layout, that is larger than a slot, or whose payload is truncated,
// altered or followed by more data. To say "nothing written" of a payload
// whose hash is known only at its end, the payload is first spooled to the
// data partition and verified; only then is it copied to the slot, read
// back and compared, and only then is the environment changed.
//
// Anti-rollback: a bundle built before the running build (its manifest's
// Created earlier than BUILD_EPOCH in the slot's release file, see
// layout.Manifest.CheckDowngrade) is refused with api.ErrDowngrade before
// its payload is read, unless the install allows a downgrade; an allowed
// downgrade is logged and flagged in the result. A running build that
// recorded no epoch cannot be compared: the install proceeds and says so
// in the log.
//
// The trial itself needs nothing from this package to fail safely: GRUB
// consumes "upgrade" before it boots the new slot, so a panic, a hang (the
// init's watchdog reboots) or an outpostd that exits (the init reboots)
// all end in the committed slot. Ready waits until outpostd is healthy —
// its admin API answers with a stored config version and every UDP SIP
// listener answers an OPTIONS — then commits the trial (or records that a
// trial of the other slot failed) and writes the ready file the init waits
// for.
//
// Reboots follow the BusyBox init convention: SIGTERM to PID 1. The
// package does not import SIP code; its OPTIONS probe is raw text over UDP.
package firmware
