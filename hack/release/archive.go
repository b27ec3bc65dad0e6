package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/yaml"
)

const (
	pluginName   = "quota"
	pluginBinary = "kubectl-quota"
	homepage     = "https://github.com/quotascale/quotascale"
)

type platform struct{ OS, Arch string }

func (p platform) String() string { return p.OS + "_" + p.Arch }

// archive is one platform's tar.gz.
type archive struct {
	Platform platform
	Path     string
	SHA256   string
}

func archiveName(version string, p platform) string {
	return fmt.Sprintf("%s_%s_%s.tar.gz", pluginBinary, version, p)
}

// writeArchive packs the binary (and the license, when there is one) at the
// archive's root. Times, owners and modes are fixed so that the checksum
// depends only on the files' bytes.
func writeArchive(dir, version string, p platform, bin, license string) (archive, error) {
	path := filepath.Join(dir, archiveName(version, p))
	f, err := os.Create(path)
	if err != nil {
		return archive{}, err
	}
	defer f.Close()
	sum := sha256.New()
	gz := gzip.NewWriter(io.MultiWriter(f, sum))
	tw := tar.NewWriter(gz)
	members := []struct {
		src, name string
		mode      int64
	}{{bin, pluginBinary, 0o755}}
	if license != "" {
		members = append(members, struct {
			src, name string
			mode      int64
		}{license, "LICENSE", 0o644})
	}
	for _, m := range members {
		if err := addFile(tw, m.src, m.name, m.mode); err != nil {
			return archive{}, fmt.Errorf("archiving %s for %s: %w", m.src, p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return archive{}, err
	}
	if err := gz.Close(); err != nil {
		return archive{}, err
	}
	if err := f.Close(); err != nil {
		return archive{}, err
	}
	return archive{Platform: p, Path: path, SHA256: hex.EncodeToString(sum.Sum(nil))}, nil
}

func addFile(tw *tar.Writer, src, name string, mode int64) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	hdr := &tar.Header{Name: name, Mode: mode, Size: int64(len(data)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = tw.Write(data)
	return err
}

// The krew plugin manifest, krew.googlecontainertools.github.com/v1alpha2
// Plugin: only the fields this plugin uses.
type manifest struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Metadata   metadata     `json:"metadata"`
	Spec       manifestSpec `json:"spec"`
}

type metadata struct {
	Name string `json:"name"`
}

type manifestSpec struct {
	Version          string             `json:"version"`
	Homepage         string             `json:"homepage"`
	ShortDescription string             `json:"shortDescription"`
	Description      string             `json:"description"`
	Platforms        []manifestPlatform `json:"platforms"`
}

type manifestPlatform struct {
	Selector selector `json:"selector"`
	URI      string   `json:"uri"`
	SHA256   string   `json:"sha256"`
	Bin      string   `json:"bin"`
}

type selector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

const description = `Explains quota decisions of a Quotascale cluster from live objects: why a
pod is pending (the CapacityQuota that blocks its scale-up, or the
ElasticQuotaTree node it would exceed), and each CapacityQuota's and quota
node's used, limits and headroom.
`

// writeManifest writes the manifest naming each archive by its release URL.
func writeManifest(path, version string, archives []archive) error {
	m := manifest{
		APIVersion: "krew.googlecontainertools.github.com/v1alpha2",
		Kind:       "Plugin",
		Metadata:   metadata{Name: pluginName},
		Spec: manifestSpec{
			Version:          version,
			Homepage:         homepage,
			ShortDescription: "Explain quota decisions of Quotascale clusters",
			Description:      description,
		},
	}
	for _, a := range archives {
		m.Spec.Platforms = append(m.Spec.Platforms, manifestPlatform{
			Selector: selector{MatchLabels: map[string]string{"os": a.Platform.OS, "arch": a.Platform.Arch}},
			URI:      fmt.Sprintf("%s/releases/download/%s/%s", homepage, version, archiveName(version, a.Platform)),
			SHA256:   a.SHA256,
			Bin:      pluginBinary,
		})
	}
	data, err := yaml.Marshal(m)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	header := "# Written by `make release` (hack/release): the archives' URLs and checksums.\n"
	return os.WriteFile(path, append([]byte(header), data...), 0o644)
}
