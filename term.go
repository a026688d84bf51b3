package main

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/charmbracelet/x/term"
)

// requireTerminal refuses to start the TUI without a terminal to draw on.
func requireTerminal() error {
	if !term.IsTerminal(os.Stdin.Fd()) || !term.IsTerminal(os.Stdout.Fd()) {
		return errors.New("the TUI needs a terminal; for scripts use the subcommands (tine --help)")
	}
	return nil
}

// writeFileAtomic writes data to path through a temporary file and a
// rename, so a reader never sees half a file.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tine-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
