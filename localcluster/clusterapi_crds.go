package localcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"

	"golang.org/x/mod/module"
)

// clusterAPIModule is the module whose controllers localcluster runs; its CRDs
// are read from the same version, so the stored objects are the ones the
// controllers were built for.
const clusterAPIModule = "sigs.k8s.io/cluster-api"

// clusterAPICRDFiles are the CRDs the Cluster, MachineDeployment, MachineSet,
// Machine and MachinePool controllers read or watch (drain rules and health
// checks included), under core/config/crd/bases of the module.
var clusterAPICRDFiles = []string{
	"cluster.x-k8s.io_clusters.yaml",
	"cluster.x-k8s.io_machinedeployments.yaml",
	"cluster.x-k8s.io_machinesets.yaml",
	"cluster.x-k8s.io_machines.yaml",
	"cluster.x-k8s.io_machinepools.yaml",
	"cluster.x-k8s.io_machinedrainrules.yaml",
	"cluster.x-k8s.io_machinehealthchecks.yaml",
}

var (
	clusterAPICRDsOnce sync.Once
	clusterAPICRDs     [][]byte
	clusterAPICRDsErr  error
)

// ClusterAPICRDs returns Cluster API's own CRD manifests, at the version this
// binary was built with. They are not part of this repository: they are read
// from the Go module cache, where building this binary put the module, and
// downloaded through the module proxy only if the cache no longer has it.
func ClusterAPICRDs(ctx context.Context) ([][]byte, error) {
	clusterAPICRDsOnce.Do(func() { clusterAPICRDs, clusterAPICRDsErr = readClusterAPICRDs(ctx) })
	return clusterAPICRDs, clusterAPICRDsErr
}

func readClusterAPICRDs(ctx context.Context) ([][]byte, error) {
	version, err := linkedVersion(ctx, clusterAPIModule)
	if err != nil {
		return nil, err
	}
	dir, err := moduleDir(ctx, clusterAPIModule, version)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, 0, len(clusterAPICRDFiles))
	for _, name := range clusterAPICRDFiles {
		raw, err := os.ReadFile(filepath.Join(dir, "core", "config", "crd", "bases", name))
		if err != nil {
			return nil, fmt.Errorf("reading Cluster API CRD %s of %s@%s: %w", name, clusterAPIModule, version, err)
		}
		out = append(out, raw)
	}
	return out, nil
}

// linkedVersion is the version of path this binary links: from its build
// information, or, in test binaries, which carry none about dependencies,
// from the module the test runs in.
func linkedVersion(ctx context.Context, path string) (string, error) {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path != path {
				continue
			}
			if dep.Replace != nil {
				dep = dep.Replace
			}
			return dep.Version, nil
		}
	}
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Version}}", path).Output()
	if err != nil {
		return "", fmt.Errorf("finding the version of %s this binary links (go list -m): %w", path, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// moduleDir finds path@version in the module cache, or downloads it there.
func moduleDir(ctx context.Context, path, version string) (string, error) {
	cache := os.Getenv("GOMODCACHE")
	if cache == "" {
		out, err := exec.CommandContext(ctx, "go", "env", "GOMODCACHE").Output()
		if err != nil {
			return "", fmt.Errorf("finding the Go module cache (go env GOMODCACHE): %w", err)
		}
		cache = strings.TrimSpace(string(out))
	}
	escaped, err := module.EscapePath(path)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, escaped+"@"+version)
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	// Outside this module's directory, so that go.mod is not touched.
	scratch, err := os.MkdirTemp("", "localcluster-gomod-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(scratch)
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", path+"@"+version)
	cmd.Dir = scratch
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var mod struct{ Dir, Error string }
	if jsonErr := json.Unmarshal(out, &mod); err != nil || jsonErr != nil || mod.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %v %s %s", path, version, err, mod.Error, stderr.String())
	}
	return mod.Dir, nil
}
