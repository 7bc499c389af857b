//go:build !linux

package main

func cgroupCPULimit() float64 { return 0 }
