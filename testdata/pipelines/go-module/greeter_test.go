package greeter

import "testing"

func TestGreet(t *testing.T) {
	if got := Greet("ada lovelace"); got != "Hello, Ada Lovelace" {
		t.Fatalf("Greet = %q", got)
	}
}
