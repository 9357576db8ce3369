//go:build !unix

package main

import (
	"errors"
	"time"
)

var errNoUpdater = errors.New("the updater runs on Unix systems only")

func spawnWatchdog(string, []string) error { return errNoUpdater }
func processAlive(int) bool                { return false }
func stopProcess(int, time.Duration) error { return errNoUpdater }
