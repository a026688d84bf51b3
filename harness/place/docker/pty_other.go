//go:build !linux

package docker

import (
	"errors"
	"os"
	"os/exec"
)

// A fork's container is Linux: tine opens its terminals only there.

var errNoPTY = errors.New("a fork's terminal is made in its Linux container only")

func openPTY() (master, slave *os.File, err error) { return nil, nil, errNoPTY }
func setSize(pty *os.File, cols, rows int) error   { return errNoPTY }
func onTerminal(cmd *exec.Cmd)                     {}
func hangUp(cmd *exec.Cmd)                         {}
