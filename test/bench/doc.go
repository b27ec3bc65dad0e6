// Package bench holds throughput benchmarks that run on the in-process control
// plane (localcluster), in the spirit of upstream's scheduler_perf. Everything is
// in _test.go files and Benchmark functions: `go test ./...` compiles the package
// but starts no control plane, and `make bench` runs the benchmarks.
//
//	go test -run='^$' -bench=SchedulerThroughput -benchtime=1x -count=5 ./test/bench/
//	go test -run='^$' -bench='SchedulerThroughput/nodes=1000' -benchtime=1x \
//	    -cpuprofile cpu.out ./test/bench/ && go tool pprof -top -focus=capacityscheduling cpu.out
package bench
