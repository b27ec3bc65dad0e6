package bench

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"runtime/debug"
	"syscall"
)

// etcdClientWarning matches the lines the API server's etcd client logs
// straight to stderr, outside klog, whenever a request is cancelled mid-flight
// (every scheduler stop cancels a few): `{"level":"warn",...,"logger":"etcd-client",...}`.
func etcdClientWarning(line []byte) bool {
	return bytes.HasPrefix(line, []byte(`{"level":`)) && bytes.Contains(line, []byte(`"logger":"etcd-client"`))
}

// captureStderr points file descriptor 2 at a pipe: the etcd client's warnings
// go to keep, everything else still reaches the real stderr at once. A fatal
// runtime error (a go test -timeout panic, say) is written to the real stderr
// too. The returned function restores stderr and waits until the pipe is
// drained.
func captureStderr(keep io.Writer) (restore func(), err error) {
	saved, err := syscall.Dup(2)
	if err != nil {
		return nil, err
	}
	realStderr := os.NewFile(uintptr(saved), "stderr")
	r, w, err := os.Pipe()
	if err != nil {
		realStderr.Close()
		return nil, err
	}
	if err := syscall.Dup3(int(w.Fd()), 2, 0); err != nil {
		realStderr.Close()
		r.Close()
		w.Close()
		return nil, err
	}
	_ = debug.SetCrashOutput(realStderr, debug.CrashOptions{})
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		lines := bufio.NewReaderSize(r, 64<<10)
		for {
			line, err := lines.ReadBytes('\n')
			if len(line) > 0 {
				if etcdClientWarning(line) {
					_, _ = keep.Write(line)
				} else {
					_, _ = realStderr.Write(line)
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return func() {
		_ = syscall.Dup3(saved, 2, 0)
		w.Close()
		<-drained
		r.Close()
	}, nil
}
