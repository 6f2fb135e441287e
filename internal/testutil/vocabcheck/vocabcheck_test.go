package vocabcheck

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

const colorSrc = `package paint

// Color is a vocabulary type.
type Color string

const (
	Red  Color = "red"
	Blue Color = "blue"
)

// Name is a string type without constants: not a vocabulary.
type Name string

func Paint(c Color) {}
`

const colorTestSrc = `package paint

func check() {
	var c Color = "red"
	if c == "blue" {
		Paint("red")
	}
	_ = map[Color]int{"red": 1}
	_ = Color("red")
	_ = c == ""
	_ = c == "green"
	_ = Red
	var n Name = "red"
	_ = n
	s := "red"
	_ = s
}
`

// The check flags each raw word of a vocabulary type in a test file
// (assigned, compared, passed, used as a map key) at its line, and leaves
// conversions, the empty string, words without a constant and strings of
// other types alone.
func TestCheckFindsRawWords(t *testing.T) {
	fset := token.NewFileSet()
	var files []*ast.File
	for name, src := range map[string]string{"paint.go": colorSrc, "paint_test.go": colorTestSrc} {
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	res := Check(fset, "example.com/paint", files, importer.Default(), func(name string) bool { return strings.HasSuffix(name, "_test.go") })
	if len(res.TypeErrors) > 0 {
		t.Fatalf("type errors: %v", res.TypeErrors)
	}
	var got []string
	for _, v := range res.Violations {
		got = append(got, v.String())
	}
	want := []string{
		`paint_test.go:4:16: raw "red" where example.com/paint.Color is expected; use example.com/paint.Red`,
		`paint_test.go:5:10: raw "blue" where example.com/paint.Color is expected; use example.com/paint.Blue`,
		`paint_test.go:6:9: raw "red" where example.com/paint.Color is expected; use example.com/paint.Red`,
		`paint_test.go:8:20: raw "red" where example.com/paint.Color is expected; use example.com/paint.Red`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Sites: the four violations, "" and "green" compared with c, and the
	// use of Red.
	if res.Sites != 7 {
		t.Errorf("sites = %d, want 7", res.Sites)
	}
}
