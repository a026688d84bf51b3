//go:build !linux && !darwin

package platform

// tine builds on Linux and macOS only (ARCHITECTURE.md, internal/platform):
// on this system the process groups and file times it relies on are not
// there. This line is what `go build` stops at, naming it.
var _ = tine_builds_on_linux_and_macos_only
