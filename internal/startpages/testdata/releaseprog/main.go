// Command releaseprog releases its start-up pages and then runs code that
// reads relocated pointers (interfaces, function values, strings in
// tables), which a PIE build keeps in read-only pages the loader wrote:
// if Release dropped those, this crashes. It prints what Release did.
package main

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"kici.dev/kici/internal/startpages"
)

var table = map[string]func(string) string{"upper": strings.ToUpper, "lower": strings.ToLower}

func main() {
	s, err := startpages.Release()
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	var keys []string
	for k := range table {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		out = append(out, table[k]("Released"))
	}
	var w fmt.Stringer = stringer(strings.Join(out, " "))
	fmt.Printf("mappings=%d %s\n", s.Mappings, w)
}

type stringer string

func (s stringer) String() string { return string(s) }
