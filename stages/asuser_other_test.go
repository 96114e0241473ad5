//go:build !linux

package stages

import "testing"

// asUser runs fn as user id where a thread can become one (Linux); here
// it cannot, and reports so.
func asUser(t *testing.T, id int, fn func()) bool { return false }
