package main

import (
	"fmt"
	"os"
)

// run is main without os.Exit: it takes the arguments after the program's
// name, writes the output and the errors to the writers it is given, and
// returns the exit code. A usage error is code 2, with its reason, before
// anything is measured.
func Example_run() {
	for _, args := range [][]string{
		{"bench"},
		{"compare", "--demo", "-routed"},
		{"sweep", "--demo", "-concurrency", "4"},
		{"report"},
	} {
		code := run(args, os.Stdout, os.Stdout)
		fmt.Println("exit code", code)
	}
	// Output:
	// tpsbench: unknown command "bench" (want run, compare, sweep, report or sim; -h for help)
	// exit code 2
	// tpsbench: compare pins each deployment; -routed belongs to run or sweep
	// exit code 2
	// tpsbench: sweep needs at least two -concurrency levels or -rate values
	// exit code 2
	// tpsbench: report needs a FILE
	// exit code 2
}
