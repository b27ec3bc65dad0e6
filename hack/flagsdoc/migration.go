package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// MigrationPath is the migration guide, whose flag tables are generated
// between the two markers.
const MigrationPath = "docs/migrating-from-upstream.md"

const (
	beginFlags = "<!-- BEGIN GENERATED FLAG TABLES: make generate writes this part from cluster-autoscaler/config; do not edit. -->\n"
	endFlags   = "<!-- END GENERATED FLAG TABLES -->\n"
)

// RenderMigration returns the migration guide doc with its flag tables
// rewritten from the flag table.
func RenderMigration(doc []byte) ([]byte, error) {
	begin := bytes.Index(doc, []byte(beginFlags))
	end := bytes.Index(doc, []byte(endFlags))
	if begin < 0 || end < begin {
		return nil, fmt.Errorf("%s: want the markers %q and %q, in that order", MigrationPath, beginFlags, endFlags)
	}
	var b bytes.Buffer
	b.Write(doc[:begin+len(beginFlags)])
	migrationTables(&b)
	b.Write(doc[end:])
	return b.Bytes(), nil
}

func migrationTables(b *bytes.Buffer) {
	opts := config.Defaults()
	fs := app.NewCommandLine(&opts).FlagSet
	var upstream, implemented, noEffect, refused int
	for _, f := range config.Flags() {
		if f.Own {
			continue
		}
		upstream++
		switch f.Treatment {
		case config.Implemented:
			implemented++
		case config.NoEffect:
			noEffect++
		case config.Refused:
			refused++
		}
	}
	fmt.Fprintf(b, "\nOf upstream's %d flags, %d are implemented, %d are accepted with no effect and %d are\n"+
		"refused at any value but upstream's default. The [flags reference](flags.md) describes every flag.\n\n",
		upstream, implemented, noEffect, refused)

	section(b, "Defaults that differ from upstream", "", "| flag | upstream | Quotascale | why |",
		func(f *config.Flag, _ *pflag.Flag) string {
			if !f.DefaultDiffers() {
				return ""
			}
			return fmt.Sprintf("| `--%s` | %s | %s | %s |", f.Name, code(f.Upstream), code(f.Ours), cell(f.Why))
		}, fs)
	b.WriteString("### Implemented as upstream\n\n")
	var plain []string
	for _, f := range config.Flags() {
		if !f.Own && f.Treatment == config.Implemented && f.Why == "" {
			plain = append(plain, "`--"+f.Name+"`")
		}
	}
	b.WriteString(wrap(strings.Join(plain, ", ")+".") + "\n\n")
	section(b, "Implemented, with a difference", "These do what upstream's do, with the difference noted.", "| flag | difference |",
		func(f *config.Flag, _ *pflag.Flag) string {
			if f.Own || f.Treatment != config.Implemented || f.Why == "" || f.DefaultDiffers() {
				return ""
			}
			return fmt.Sprintf("| `--%s` | %s |", f.Name, cell(f.Why))
		}, fs)
	section(b, "Accepted with no effect", "A value other than upstream's default logs one warning at start-up, naming the flag.", "| flag | why |",
		func(f *config.Flag, _ *pflag.Flag) string {
			if f.Own || f.Treatment != config.NoEffect {
				return ""
			}
			return fmt.Sprintf("| `--%s` | %s |", f.Name, cell(f.Why))
		}, fs)
	section(b, "Refused at other values", "At upstream's default these are accepted; any other value stops the process at start-up with the reason.",
		"| flag | refused values | why | planned |",
		func(f *config.Flag, _ *pflag.Flag) string {
			if f.Own || f.Treatment != config.Refused {
				return ""
			}
			planned := ""
			if f.Issue != 0 {
				planned = fmt.Sprintf("#%d", f.Issue)
			}
			return fmt.Sprintf("| `--%s` | %s | %s | %s |", f.Name, refusedValues(f), cell(f.Why), planned)
		}, fs)
	section(b, "Quotascale's own flags", "", "| flag | default | what it does |",
		func(f *config.Flag, flag *pflag.Flag) string {
			if !f.Own {
				return ""
			}
			return fmt.Sprintf("| `--%s` | %s | %s |", f.Name, code(flag.DefValue), cell(description(f, flag)))
		}, fs)
}

// section writes a table of the rows row returns a line for.
func section(b *bytes.Buffer, title, intro, header string, row func(*config.Flag, *pflag.Flag) string, fs *pflag.FlagSet) {
	fmt.Fprintf(b, "### %s\n\n", title)
	if intro != "" {
		b.WriteString(intro + "\n\n")
	}
	b.WriteString(header + "\n|")
	for range bytes.Count([]byte(header), []byte("|")) - 1 {
		b.WriteString(" --- |")
	}
	b.WriteString("\n")
	for _, f := range config.Flags() {
		if line := row(&f, fs.Lookup(f.Name)); line != "" {
			b.WriteString(line + "\n")
		}
	}
	b.WriteString("\n")
}

// wrap breaks text into lines of at most 100 characters, at spaces.
func wrap(text string) string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > 100 {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return strings.Join(append(lines, line), "\n")
}
