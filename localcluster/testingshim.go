package localcluster

import (
	"fmt"
	"os"
	"sync"

	"k8s.io/klog/v2"
)

// shim lets the kube-apiserver test server, which expects a testing.TB, run in
// TestMain and in the demo binary, where no *testing.T exists. Cleanups run when the
// cluster stops; a Fatal unwinds to Start through a panic that Start recovers.
type shim struct {
	logger klog.Logger

	mu       sync.Mutex
	cleanups []func()
	tempDirs []string
	baseDir  string
	failed   bool
	name     string
}

type shimFatal struct{ msg string }

func newShim(name, baseDir string, logger klog.Logger) *shim {
	return &shim{name: name, baseDir: baseDir, logger: logger}
}

func (s *shim) Attr(string, string) {}
func (s *shim) Chdir(string)        { panic("localcluster: Chdir is not supported outside go test") }
func (s *shim) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}
func (s *shim) Error(args ...any) { s.markFailed(); s.logger.Error(nil, fmt.Sprint(args...)) }
func (s *shim) Errorf(format string, args ...any) {
	s.markFailed()
	s.logger.Error(nil, fmt.Sprintf(format, args...))
}
func (s *shim) Fail()          { s.markFailed() }
func (s *shim) FailNow()       { s.markFailed(); panic(shimFatal{"FailNow"}) }
func (s *shim) Failed() bool   { s.mu.Lock(); defer s.mu.Unlock(); return s.failed }
func (s *shim) Fatal(a ...any) { s.markFailed(); panic(shimFatal{fmt.Sprint(a...)}) }
func (s *shim) Fatalf(format string, args ...any) {
	s.markFailed()
	panic(shimFatal{fmt.Sprintf(format, args...)})
}
func (s *shim) Helper()                          {}
func (s *shim) Log(args ...any)                  { s.logger.Info(fmt.Sprint(args...)) }
func (s *shim) Logf(format string, args ...any)  { s.logger.Info(fmt.Sprintf(format, args...)) }
func (s *shim) Name() string                     { return s.name }
func (s *shim) Setenv(key, value string)         { _ = os.Setenv(key, value) }
func (s *shim) Skip(args ...any)                 { panic(shimFatal{"Skip: " + fmt.Sprint(args...)}) }
func (s *shim) Skipf(format string, args ...any) { s.Skip(fmt.Sprintf(format, args...)) }
func (s *shim) SkipNow()                         { s.Skip() }
func (s *shim) Skipped() bool                    { return false }
func (s *shim) TempDir() string {
	dir, err := os.MkdirTemp(s.baseDir, "tmp")
	if err != nil {
		panic(shimFatal{fmt.Sprintf("creating a temp dir: %v", err)})
	}
	s.mu.Lock()
	s.tempDirs = append(s.tempDirs, dir)
	s.mu.Unlock()
	return dir
}

func (s *shim) markFailed() { s.mu.Lock(); s.failed = true; s.mu.Unlock() }

// runCleanups runs the registered cleanups in reverse order, like testing.T.
func (s *shim) runCleanups() {
	s.mu.Lock()
	cleanups := s.cleanups
	s.cleanups = nil
	dirs := s.tempDirs
	s.tempDirs = nil
	s.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}
