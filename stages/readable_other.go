//go:build !unix

package stages

import "os"

// readable reports whether this process may read the file at path.
var readable = func(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}
