//go:build !unix

package stages

import "os"

// lockSocket takes no lock where there is no flock.
func lockSocket(string) (*os.File, error) { return nil, nil }
