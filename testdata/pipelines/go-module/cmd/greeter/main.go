// Command greeter prints a greeting for its argument.
package main

import (
	"fmt"
	"os"

	"example.com/greeter"
)

func main() {
	name := "world"
	if len(os.Args) > 1 {
		name = os.Args[1]
	}
	fmt.Println(greeter.Greet(name))
}
