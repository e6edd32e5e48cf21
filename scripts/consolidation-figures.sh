#!/usr/bin/env bash
# consolidation-figures.sh prints the figures issue 14's closing note asks for,
# for two commits: non-test Go lines per package, split by what changed them;
# the 15 most complex functions (gocyclo); exported identifiers per package;
# and the number of duplicates pairs. docs/CONSOLIDATION.md explains them.
#
# Usage: scripts/consolidation-figures.sh [BEFORE [AFTER]]
# (defaults 7154670 and HEAD). Needs gocyclo on PATH or in $(go env GOPATH)/bin
# (go install github.com/fzipp/gocyclo/cmd/gocyclo@v0.6.0) and, for the
# duplicates count, the duplicates tool; without it that section is skipped.
set -euo pipefail

before=${1:-7154670}
after=${2:-HEAD}
cd "$(git rev-parse --show-toplevel)"
PATH=$PATH:$(go env GOPATH)/bin

# Commits between BEFORE and AFTER that are not the consolidation: issue 16's
# features and their tuning, issue 17's performance work, and bug fixes. A
# commit whose message names "issue 16" or "issue 17" counts there; these
# lists add the ones whose message does not. Every other commit in the range
# counts as consolidation (issue 14). Pick's performance work for its budget
# (issues 16 and 17) counts with issue 16, whose features it pays for.
issue16="d09f491 93fd1e3 180348b d6de57b c399e54 47ee98e 64bc6f9 50f61f4 282d24c 0c258d9 6a99c4f c2c11bd"
issue17="ac410d2 97fc94c 4f4cedc"
fixes="0f53910 fe92a2e 092e11b cd05a2e 411b15f"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for side in before after; do
	mkdir "$tmp/$side"
	git archive "${!side}" | tar -x -C "$tmp/$side"
done

# lines TREE: "dir lines" for the non-test Go files of each directory.
lines() {
	(cd "$1" && find . -name '*.go' ! -name '*_test.go' -print0 | xargs -0 wc -l |
		awk '$2 != "total" {d = $2; sub(/\/[^\/]*$/, "", d); sub(/^\.\/?/, "", d); if (d == "") d = "."; n[d] += $1}
		END {for (d in n) print d, n[d]}')
}

# category COMMIT: 16, 17, fix or 14.
category() {
	local c
	for c in $issue16; do [[ $1 == $c* ]] && { echo 16; return; }; done
	for c in $issue17; do [[ $1 == $c* ]] && { echo 17; return; }; done
	for c in $fixes; do [[ $1 == $c* ]] && { echo fix; return; }; done
	case $(git log -1 --format=%B "$1") in
	*"issue 16"*) echo 16 ;;
	*"issue 17"*) echo 17 ;;
	*) echo 14 ;;
	esac
}

# changes: "category dir added-deleted" per commit and directory (non-test Go files).
changes() {
	local c cat
	for c in $(git rev-list --no-merges "$before..$after"); do
		cat=$(category "$c")
		git show --no-renames --numstat --format= "$c" -- '*.go' |
			awk -v cat="$cat" '$3 !~ /_test\.go$/ {d = $3; if (d !~ /\//) d = "."; else sub(/\/[^\/]*$/, "", d); n[d] += $1 - $2}
			END {for (d in n) print cat, d, n[d]}'
	done
}

echo "== non-test Go lines per package: $before -> $after"
echo "   (issue 16, issue 17 and fixes are the net lines of their commits; consolidation is the rest of the change)"
lines "$tmp/before" | sort >"$tmp/lb"
lines "$tmp/after" | sort >"$tmp/la"
changes >"$tmp/ch"
awk '
	FILENAME == ARGV[1] {b[$1] = $2; d[$1] = 1; next}
	FILENAME == ARGV[2] {a[$1] = $2; d[$1] = 1; next}
	{c[$1, $2] += $3}
	END {
		printf "%-28s %7s %7s %7s %9s %9s %6s %13s\n", "package", "before", "after", "change", "issue 16", "issue 17", "fixes", "consolidation"
		for (p in d) {
			ch = a[p] - b[p]; rest = ch - c["16", p] - c["17", p] - c["fix", p]
			printf "%-28s %7d %7d %+7d %+9d %+9d %+6d %+13d\n", p, b[p], a[p], ch, c["16", p], c["17", p], c["fix", p], rest
			tb += b[p]; ta += a[p]; t16 += c["16", p]; t17 += c["17", p]; tf += c["fix", p]; tr += rest
		}
		printf "%-28s %7d %7d %+7d %+9d %+9d %+6d %+13d\n", "TOTAL", tb, ta, ta - tb, t16, t17, tf, tr
	}' "$tmp/lb" "$tmp/la" "$tmp/ch" | sort -k1,1 | awk '/^package/ {h = $0; next} /^TOTAL/ {t = $0; next} {r = r $0 "\n"} END {print h; printf "%s", r; print t}'

testlines() { (cd "$1" && find . -name '*_test.go' -print0 | xargs -0 cat | wc -l); }
echo "test Go lines (not in the table): before $(testlines "$tmp/before"), after $(testlines "$tmp/after")"

for side in before after; do
	echo
	echo "== gocyclo -top 15 (non-test files), $side (${!side})"
	(cd "$tmp/$side" && gocyclo -top 15 -ignore '_test\.go$|/testdata/' .)
	echo "functions over 20: $(cd "$tmp/$side" && gocyclo -over 20 -ignore '_test\.go$|/testdata/' . | wc -l)"
done

# The exported-identifier counter: top-level exported consts, vars, types and
# funcs, and exported methods of exported types, per directory of non-test files.
mkdir "$tmp/exported"
cat >"$tmp/exported/main.go" <<'GO'
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	n := map[string]int{}
	root := os.Args[1]
	filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.Contains(path, "/testdata/") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if decl.Recv != nil {
					t := decl.Recv.List[0].Type
					if s, ok := t.(*ast.StarExpr); ok {
						t = s.X
					}
					if ix, ok := t.(*ast.IndexExpr); ok {
						t = ix.X
					}
					if id, ok := t.(*ast.Ident); !ok || !id.IsExported() {
						continue
					}
				}
				if decl.Name.IsExported() {
					n[dir]++
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						if spec.Name.IsExported() {
							n[dir]++
						}
					case *ast.ValueSpec:
						for _, id := range spec.Names {
							if id.IsExported() {
								n[dir]++
							}
						}
					}
				}
			}
		}
		return nil
	})
	for dir, c := range n {
		fmt.Println(dir, c)
	}
}
GO
echo
echo "== exported identifiers per package (consts, vars, types, funcs, methods of exported types)"
(cd "$tmp/exported" && go mod init exported >/dev/null 2>&1 && go build -o count . )
"$tmp/exported/count" "$tmp/before" | sort >"$tmp/eb"
"$tmp/exported/count" "$tmp/after" | sort >"$tmp/ea"
join -a1 -a2 -e0 -o 0,1.2,2.2 "$tmp/eb" "$tmp/ea" |
	awk '{printf "%-28s %7d %7d %+7d\n", $1, $2, $3, $3 - $2; b += $2; a += $3}
	BEGIN {printf "%-28s %7s %7s %7s\n", "package", "before", "after", "change"}
	END {printf "%-28s %7d %7d %+7d\n", "TOTAL", b, a, a - b}'

if command -v duplicates >/dev/null; then
	echo
	echo "== duplicates pairs (whole tree, tests included; duplicates --most 1 --seconds 300)"
	for side in before after; do
		echo "$side: $(duplicates --repo "$tmp/$side" --most 1 --seconds 300 | head -1)"
	done
fi
