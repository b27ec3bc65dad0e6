package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"text/template"

	"sigs.k8s.io/yaml"
)

// manifestPlatform is what the template writes for one platform.
type manifestPlatform struct {
	OS, Arch, URI, SHA256 string
	Files                 []string
}

// writeManifest fills the template with the version and each archive's
// release URL, checksum and members.
func writeManifest(templatePath, manifestPath, version string, archives []archive) error {
	t, err := template.New(filepath.Base(templatePath)).Option("missingkey=error").ParseFiles(templatePath)
	if err != nil {
		return fmt.Errorf("reading the manifest template: %w", err)
	}
	data := struct {
		Version   string
		Platforms []manifestPlatform
	}{Version: version}
	for _, a := range archives {
		data.Platforms = append(data.Platforms, manifestPlatform{
			OS:     a.Platform.OS,
			Arch:   a.Platform.Arch,
			URI:    releases + "/" + url.PathEscape(version) + "/" + url.PathEscape(filepath.Base(a.Path)),
			SHA256: a.SHA256,
			Files:  a.Files,
		})
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return fmt.Errorf("filling %s: %w", templatePath, err)
	}
	return os.WriteFile(manifestPath, buf.Bytes(), 0o644)
}

// The part of krew's Plugin manifest that verifyManifest reads.
type pluginManifest struct {
	Spec struct {
		Version   string `json:"version"`
		Platforms []struct {
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
			Files  []struct {
				From string `json:"from"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

// verifyManifest reads the manifest back and checks that every platform's
// archive, found in dir by the URL's file name, has the manifest's sha256 and
// holds the files the manifest copies and the binary it links.
func verifyManifest(manifestPath, dir string) error {
	data, err := os.ReadFile(manifestPath)
	if err != nil {
		return err
	}
	var m pluginManifest
	if err := yaml.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("%s: %w", manifestPath, err)
	}
	if len(m.Spec.Platforms) != len(platforms) {
		return fmt.Errorf("%s lists %d platforms, want %d", manifestPath, len(m.Spec.Platforms), len(platforms))
	}
	var errs []error
	for _, p := range m.Spec.Platforms {
		u, err := url.Parse(p.URI)
		if err != nil {
			errs = append(errs, fmt.Errorf("uri %q: %w", p.URI, err))
			continue
		}
		archivePath := filepath.Join(dir, path.Base(u.Path))
		content, err := os.ReadFile(archivePath)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if sum := sha256.Sum256(content); hex.EncodeToString(sum[:]) != p.SHA256 {
			errs = append(errs, fmt.Errorf("%s has sha256 %x, the manifest says %s", archivePath, sum, p.SHA256))
		}
		members, err := archiveMembers(content)
		if err != nil {
			errs = append(errs, fmt.Errorf("reading %s: %w", archivePath, err))
			continue
		}
		want := []string{p.Bin}
		for _, f := range p.Files {
			want = append(want, f.From)
		}
		for _, name := range want {
			if !slices.Contains(members, name) {
				errs = append(errs, fmt.Errorf("%s has no %s, which the manifest installs", archivePath, name))
			}
		}
	}
	return errors.Join(errs...)
}

// archiveMembers lists the names in a tar.gz.
func archiveMembers(content []byte) ([]string, error) {
	gz, err := gzip.NewReader(bytes.NewReader(content))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return names, nil
		}
		if err != nil {
			return nil, err
		}
		names = append(names, hdr.Name)
	}
}
