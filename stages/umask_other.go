//go:build !unix

package stages

// umask is the file-mode creation mask; Windows has none.
var umask uint32
