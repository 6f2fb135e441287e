//go:build !linux

package startpages

// Release does nothing where there is no /proc/self/smaps to read: it
// returns ErrUnsupported, and the resident size is left as the kernel
// keeps it.
func Release() (Stats, error) { return Stats{}, ErrUnsupported }
