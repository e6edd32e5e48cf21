package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// countDir counts what a user can name in one package: here a constant, a
// type, its constructor and its exported method. The unexported method and
// variable, the struct's field and the test file's function are not counted,
// nor is a command's package main.
func Example_countDir() {
	dir, err := os.MkdirTemp("", "exported-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	files := map[string]string{
		"shapes/shapes.go": `package shapes

// Pi is π to five places.
const Pi = 3.14159

// Circle is a circle of radius R.
type Circle struct{ R float64 }

// NewCircle returns a circle of radius r.
func NewCircle(r float64) Circle { return Circle{r} }

// Area returns the circle's area.
func (c Circle) Area() float64 { return Pi * c.R * c.R }

func (c Circle) scale(k float64) Circle { return Circle{c.R * k} }

var unit = Circle{1}
`,
		"shapes/shapes_test.go": "package shapes\n\nfunc Helper() {}\n",
		"cmd/draw/main.go":      "package main\n\nfunc Draw() {}\n\nfunc main() {}\n",
	}
	for name, src := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			panic(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			panic(err)
		}
	}
	for _, pkg := range []string{"shapes", "cmd/draw"} {
		n, err := countDir(filepath.Join(dir, pkg))
		fmt.Println(pkg, n, err)
	}
	// Output:
	// shapes 4 <nil>
	// cmd/draw 0 <nil>
}
