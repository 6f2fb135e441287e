// Package greeter builds greetings.
package greeter

import "example.com/strutil"

// Greet returns the greeting for name, title-cased.
func Greet(name string) string {
	return strutil.Title("hello, " + name)
}
