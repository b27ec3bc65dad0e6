#!/usr/bin/env bash
# Lists the import paths of the packages `make test` runs under the race detector: those with tests
# whose own (non-test) code runs goroutines or shares state between them (go
# statements, sync and atomic, informers, servers, leader election). The rest
# are single-threaded by construction (the quota library is pure, for
# instance), and building their dependencies a second time with -race would
# cost CI minutes for nothing. The e2e and bench packages are left out: they
# link the whole control plane, which -race would build again.
set -euo pipefail
cd "$(dirname "$0")/.."
concurrency='(^|[^[:alnum:]_])go (func|[[:alnum:]_.]+\()|sync\.(Mutex|RWMutex|WaitGroup|Once|Map)|atomic\.|\.Start\(|Informer\(|ListenAndServe|Serve\(|leaderelection'
go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}} {{join .GoFiles " "}}{{end}}' ./... |
	while read -r pkg dir files; do
		case "$dir" in */test/e2e | */test/bench) continue ;; esac
		[ -n "$files" ] || continue
		if (cd "$dir" && grep -qE "$concurrency" $files); then
			echo "$pkg"
		fi
	done
