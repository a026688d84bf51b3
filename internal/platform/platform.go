// Package platform is where the build stops on a system tine does not
// support. tine builds on Linux and macOS (amd64 and arm64): it starts
// agents and checks in their own process group and stops the whole group
// (setpgid, kill(-pgid)), tells a live owner by kill(pid, 0), and trusts
// its scan file by the database's inode and change time. The packages
// that do such things (store, harness/fork, internal/agentproc) keep
// them in per-OS files and import this package, so that elsewhere the
// one error is the one in unsupported.go rather than a list of missing
// fields and functions.
package platform
