// Package codegen produces every generated file of the repository: deepcopy
// functions for the API types and the CRD manifests, with the ElasticQuotaTree
// schema unrolled to a fixed depth. It returns the files instead of writing them so
// that a test can tell when the committed copies are stale.
package codegen

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/tools/go/packages"
	"sigs.k8s.io/controller-tools/pkg/crd"
	"sigs.k8s.io/controller-tools/pkg/deepcopy"
	"sigs.k8s.io/controller-tools/pkg/genall"
	"sigs.k8s.io/controller-tools/pkg/loader"
)

// CRDDir is where the CRD manifests live, relative to the repository root.
const CRDDir = "apis/crds"

// Generate runs the generators over ./apis/... of the repository at root and returns
// the generated files keyed by their slash-separated path relative to root.
func Generate(root string) (map[string][]byte, error) {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", root, err)
	}
	var deepcopyGen genall.Generator = deepcopy.Generator{}
	var crdGen genall.Generator = crd.Generator{}
	gens := genall.Generators{&deepcopyGen, &crdGen}
	rt, err := gens.ForRootsWithConfig(&packages.Config{Dir: absRoot}, "./apis/...")
	if err != nil {
		return nil, fmt.Errorf("loading ./apis/...: %w", err)
	}
	out := &memoryOutput{root: absRoot, files: map[string]*bytes.Buffer{}}
	rt.OutputRules = genall.OutputRules{Default: out}
	var errs bytes.Buffer
	rt.ErrorWriter = &errs
	if failed := rt.Run(); failed {
		return nil, fmt.Errorf("controller-gen failed: %s", errs.String())
	}

	files := make(map[string][]byte, len(out.files))
	for path, buf := range out.files {
		files[path] = buf.Bytes()
	}
	eqt := CRDDir + "/scheduling.sigs.k8s.io_elasticquotatrees.yaml"
	unrolled, err := unrollElasticQuotaTree(files[eqt])
	if err != nil {
		return nil, fmt.Errorf("unrolling %s: %w", eqt, err)
	}
	files[eqt] = unrolled
	if err := addServedAliases(files); err != nil {
		return nil, err
	}
	return files, nil
}

// Write writes files under root.
func Write(root string, files map[string][]byte) error {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return fmt.Errorf("creating directory for %s: %w", p, err)
		}
		if err := os.WriteFile(full, files[p], 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", p, err)
		}
	}
	return nil
}

// memoryOutput collects artifacts: Go code next to its package, config (the CRDs)
// under CRDDir.
type memoryOutput struct {
	root  string
	files map[string]*bytes.Buffer
}

func (m *memoryOutput) Open(pkg *loader.Package, itemPath string) (io.WriteCloser, error) {
	dir := CRDDir
	if pkg != nil {
		if len(pkg.CompiledGoFiles) == 0 {
			return nil, fmt.Errorf("package %s has no files on disk", pkg.PkgPath)
		}
		rel, err := filepath.Rel(m.root, filepath.Dir(pkg.CompiledGoFiles[0]))
		if err != nil {
			return nil, fmt.Errorf("locating package %s: %w", pkg.PkgPath, err)
		}
		dir = filepath.ToSlash(rel)
	}
	buf := &bytes.Buffer{}
	m.files[dir+"/"+itemPath] = buf
	return nopCloser{buf}, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
