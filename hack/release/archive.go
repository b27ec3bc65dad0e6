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
)

const (
	pluginName   = "quota"
	pluginBinary = "kubectl-quota"
	// releases is where a release's archives are downloaded from, by tag.
	releases = "https://github.com/quotascale/quotascale/releases/download"
)

type platform struct{ OS, Arch string }

func (p platform) String() string { return p.OS + "_" + p.Arch }

// archive is one platform's tar.gz.
type archive struct {
	Platform platform
	Path     string
	SHA256   string
	// Files are the names of its members, all at the archive's root.
	Files []string
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
	var files []string
	for _, m := range members {
		if err := addFile(tw, m.src, m.name, m.mode); err != nil {
			return archive{}, fmt.Errorf("archiving %s for %s: %w", m.src, p, err)
		}
		files = append(files, m.name)
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
	return archive{Platform: p, Path: path, SHA256: hex.EncodeToString(sum.Sum(nil)), Files: files}, nil
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
