package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// verbose lists every name counted, one per line, before the totals.
var verbose = flag.Bool("v", false, "list every name counted")

func main() {
	flag.Parse()
	counts := map[string]int{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		for _, skip := range []string{"internal", "examples", "cmd", "scripts", "testdata", ".git"} {
			if strings.Contains("/"+path+"/", "/"+skip+"/") {
				return filepath.SkipDir
			}
		}
		n, err := countDir(path)
		if err != nil {
			return err
		}
		if n > 0 {
			counts[path] = n
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "exported:", err)
		os.Exit(1)
	}
	var dirs []string
	total := 0
	for d, n := range counts {
		dirs = append(dirs, d)
		total += n
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		fmt.Printf("%5d  %s\n", counts[d], d)
	}
	fmt.Printf("%5d  total\n", total)
}

// countDir returns the exported names of the package in dir, 0 without one.
func countDir(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	fset := token.NewFileSet()
	pkgs := map[string][]*ast.File{} // by package name; build tags are not read
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return 0, err
		}
		pkgs[f.Name.Name] = append(pkgs[f.Name.Name], f)
	}
	n := 0
	for name, files := range pkgs {
		if name == "main" {
			continue
		}
		p, err := doc.NewFromFiles(fset, files, "x")
		if err != nil {
			return 0, err
		}
		count := func(name string) {
			n++
			if *verbose {
				fmt.Printf("%s.%s\n", dir, name)
			}
		}
		values := func(vs []*doc.Value) {
			for _, v := range vs {
				for _, name := range v.Names {
					if ast.IsExported(name) {
						count(name)
					}
				}
			}
		}
		values(p.Consts)
		values(p.Vars)
		for _, f := range p.Funcs {
			count(f.Name)
		}
		for _, t := range p.Types {
			count(t.Name)
			values(t.Consts)
			values(t.Vars)
			for _, f := range t.Funcs {
				count(f.Name)
			}
			for _, m := range t.Methods {
				count(t.Name + "." + m.Name)
			}
		}
	}
	return n, nil
}
