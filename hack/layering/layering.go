// Package layering checks the module's imports against the layout table of
// docs/architecture.md, whose "may import" column is the rule: the document
// cannot drift from the code, because the test reads the one to judge the other.
//
// A cell of that column lists what a row's packages may import besides the
// standard library and their own row: backticked module folders (`quota/`,
// `cluster-autoscaler/config`: the packages in and below them), backticked
// library path prefixes (`k8s.io/client-go`: a domain comes first), and the
// words "any library" (every import from outside the module) or "anything". A
// package belongs to the row with the longest path that contains it.
package layering

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

// Rule is one row of the layout table.
type Rule struct {
	// Path is the row's module folder, ending in "/".
	Path string
	// Folders are the module folders whose packages, and those below, the row
	// may import; each ends in "/".
	Folders []string
	// Libraries are the path prefixes of the outside libraries it may import.
	Libraries []string
	// AnyLibrary allows every import from outside the module.
	AnyLibrary bool
	// Anything allows every import.
	Anything bool
}

// Package is one package of the module and what it imports.
type Package struct {
	ImportPath string
	Imports    []string
}

var backticked = regexp.MustCompile("`([^`]+)`")

// ParseRules reads the layout table: the first Markdown table after the
// heading that starts with "## Layout", whose header has a "may import" column.
func ParseRules(doc io.Reader) ([]Rule, error) {
	var rules []Rule
	inSection, column := false, -1
	scanner := bufio.NewScanner(doc)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		switch {
		case strings.HasPrefix(line, "## "):
			if len(rules) > 0 {
				return rules, nil
			}
			inSection = strings.HasPrefix(line, "## Layout")
			continue
		case !inSection || !strings.HasPrefix(line, "|"):
			if len(rules) > 0 {
				return rules, nil
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if column < 0 {
			for i, c := range cells {
				if strings.TrimSpace(c) == "may import" {
					column = i
				}
			}
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(cells[0]), "---") {
			continue
		}
		rule, ok, err := parseRow(cells, column)
		if err != nil {
			return nil, err
		}
		if ok {
			rules = append(rules, rule)
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, err
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf(`no layout table: want a table with a "may import" column under a "## Layout" heading`)
	}
	return rules, nil
}

// parseRow reads one row; a row whose path is no Go folder (charts/, docs/)
// has an empty "may import" cell and is skipped.
func parseRow(cells []string, column int) (Rule, bool, error) {
	if column >= len(cells) {
		return Rule{}, false, fmt.Errorf("row %q has no may-import cell", strings.Join(cells, "|"))
	}
	path := backticked.FindStringSubmatch(cells[0])
	cell := cells[column]
	if path == nil || strings.TrimSpace(cell) == "" {
		return Rule{}, false, nil
	}
	rule := Rule{
		Path:       folder(path[1]),
		AnyLibrary: strings.Contains(cell, "any library"),
		Anything:   strings.Contains(cell, "anything"),
	}
	for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
		// A library's path starts with a domain; a folder of the module's
		// does not, as the standard library's do not.
		if isStandard(m[1]) {
			rule.Folders = append(rule.Folders, folder(m[1]))
		} else {
			rule.Libraries = append(rule.Libraries, m[1])
		}
	}
	return rule, true, nil
}

// folder turns a row's path into a folder prefix: `apis/<group>/<version>/`
// is the row of apis/.
func folder(path string) string {
	if i := strings.Index(path, "<"); i >= 0 {
		path = path[:i]
	}
	return strings.TrimSuffix(path, "/") + "/"
}

// Check returns every import that breaks the rules, sorted, and every package
// that no row covers: module is the module path, packages are the module's
// packages.
func Check(module string, rules []Rule, packages []Package) []string {
	var problems []string
	for _, p := range packages {
		rule, ok := ruleOf(module, rules, p.ImportPath)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: in no row of the layout table", p.ImportPath))
			continue
		}
		for _, imp := range p.Imports {
			if why := forbidden(module, rules, rule, imp); why != "" {
				problems = append(problems, fmt.Sprintf("%s (row %s) imports %s: %s", p.ImportPath, rule.Path, imp, why))
			}
		}
	}
	sort.Strings(problems)
	return problems
}

// forbidden says why rule may not import imp, or "" when it may.
func forbidden(module string, rules []Rule, rule Rule, imp string) string {
	if rule.Anything || isStandard(imp) {
		return ""
	}
	if imp != module && !strings.HasPrefix(imp, module+"/") {
		if rule.AnyLibrary || hasPrefix(imp, rule.Libraries) {
			return ""
		}
		return "a library its row does not list"
	}
	target, ok := ruleOf(module, rules, imp)
	switch {
	case !ok:
		return "a package in no row"
	case target.Path == rule.Path:
		return ""
	}
	rel := strings.TrimPrefix(imp, module+"/") + "/"
	for _, f := range rule.Folders {
		if strings.HasPrefix(rel, f) {
			return ""
		}
	}
	return "its row does not list " + target.Path + " or a folder holding it"
}

// ruleOf finds the row with the longest path that holds the package.
func ruleOf(module string, rules []Rule, importPath string) (Rule, bool) {
	rel := strings.TrimPrefix(importPath, module+"/") + "/"
	best, found := Rule{}, false
	for _, r := range rules {
		if strings.HasPrefix(rel, r.Path) && len(r.Path) > len(best.Path) {
			best, found = r, true
		}
	}
	return best, found
}

func hasPrefix(path string, prefixes []string) bool {
	for _, p := range prefixes {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// isStandard tells standard-library paths by their first element, which has
// no dot; "C" is cgo.
func isStandard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}
