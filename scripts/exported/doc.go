// Exported counts the exported names of the module's public packages, the
// figure issue 27 holds to 450 (docs/ARCHITECTURE.md, "The public surface").
//
// Usage, at the module's root:
//
//	go run ./scripts/exported [-v]
//
// It counts what a user of the module can name, package by package, read
// with go/doc from the non-test files: each exported constant, variable,
// function and type, and each exported method of an exported type. Struct
// fields and interface methods are not counted (they belong to their type).
// Packages under internal/, examples/, cmd/ and scripts/, and testdata, are
// left out: nobody outside the module imports them. So is any package main.
//
// It prints one line per package that has exported names, the count and the
// directory, sorted by directory, then the total; -v lists every name
// counted, one per line as dir.Name or dir.Type.Method, before them. Build
// constraints are not read: every non-test file of a directory counts. It
// reads the tree under the current directory and writes no file; on an
// error it prints the error to standard error and exits with status 1.
package main
