package localcluster

import (
	"flag"
	"io"
	"os"
	"sync"

	"k8s.io/klog/v2"
)

// LogBuffer keeps the most recent log output of the process, bounded, so that a
// test binary can stay quiet and still show what the components said when a test
// fails.
type LogBuffer struct {
	mu    sync.Mutex
	limit int
	buf   []byte
}

// NewLogBuffer keeps at most limit bytes.
func NewLogBuffer(limit int) *LogBuffer { return &LogBuffer{limit: limit} }

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.limit; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

// WriteTo writes the kept output.
func (b *LogBuffer) WriteTo(w io.Writer) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := w.Write(b.buf)
	return int64(n), err
}

// CaptureKlog sends klog's process-wide output to w instead of stderr. The
// control plane prints a few hundred lines per start; tests and the demo keep them
// out of sight and show them on failure.
func CaptureKlog(w io.Writer) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	_ = fs.Set("skip_headers", "false")
	klog.SetOutput(w)
	klog.LogToStderr(false)
}

// RunTests is a TestMain helper: it captures the logs, runs the tests and prints
// the logs when a test failed. QUOTASCALE_TEST_LOGS=stderr streams them instead,
// for debugging.
func RunTests(m interface{ Run() int }) int {
	if os.Getenv("QUOTASCALE_TEST_LOGS") == "stderr" {
		return m.Run()
	}
	logs := NewLogBuffer(16 << 20)
	CaptureKlog(logs)
	code := m.Run()
	if code != 0 {
		_, _ = os.Stderr.WriteString("\n--- control plane logs (most recent last) ---\n")
		_, _ = logs.WriteTo(os.Stderr)
	}
	return code
}
