package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// TestCapacityQuotaVisibilityLogGKE: seed 001's scenario, run with
// --visibility-log-format=gke, writes lines that GKE's documented query for
// quota-blocked scale-ups selects. Each line is the jsonPayload of a Cloud
// Logging entry (what a logging agent makes of a JSON line); the query's field
// path is evaluated on it as Cloud Logging does, stepping into every element
// of a list.
func TestCapacityQuotaVisibilityLogGKE(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	applyCapacityQuotas(t, ctx, readTestdata(t, "capacity-quota/quota.yaml"))
	visibility := filepath.Join(t.TempDir(), "visibility.log")
	a := startAutoscaler(t, ctx, seedCapacityQuotaGroup, func(o *config.Options) {
		o.VisibilityLogFile = visibility
		o.VisibilityLogFormat = "gke"
	})
	applyInNamespace(t, ctx, ns, readTestdata(t, "capacity-quota/workload.yaml"))
	waitUnschedulable(t, ctx, ns, 16)

	var selected []any
	a.loopUntil(t, ctx, "a line the GKE query selects", func(context.Context) error {
		entries := readJSONLines(t, visibility)
		selected = nil
		for _, e := range entries {
			// jsonPayload.noDecisionStatus.noScaleUp.skippedMigs:*
			selected = append(selected, fieldPath(map[string]any{"jsonPayload": e}, "jsonPayload.noDecisionStatus.noScaleUp.skippedMigs")...)
		}
		if len(selected) == 0 {
			return fmt.Errorf("none of %d lines has jsonPayload.noDecisionStatus.noScaleUp.skippedMigs", len(entries))
		}
		return nil
	})
	// What the selected lines say is seed 001's example: the quota, by GKE's
	// message id, on the node group by GKE's name for it.
	found := false
	for _, m := range selected {
		ids := fieldPath(m, "reason.messageId")
		params := fieldPath(m, "reason.parameters")
		names := fieldPath(m, "mig.name")
		zones := fieldPath(m, "mig.zone")
		if fmt.Sprint(ids) == "[no.scale.up.mig.skipped]" && fmt.Sprint(params) == "["+seedQuotaReason+"]" &&
			fmt.Sprint(names) == "[e2e-kwok-n2-standard-2]" && fmt.Sprint(zones) == "[us-central1-f]" {
			found = true
		}
	}
	if !found {
		t.Errorf("no selected skippedMigs element names the quota on e2e-kwok-n2-standard-2: %v", selected)
	}
	// The scale-up the quota allowed is there too, under GKE's names.
	var increased []any
	for _, e := range readJSONLines(t, visibility) {
		increased = append(increased, fieldPath(e, "decision.scaleUp.increasedMigs.mig.nodepool")...)
	}
	if fmt.Sprint(increased) != "[e2e-kwok-n2-standard-2]" {
		t.Errorf("decision.scaleUp.increasedMigs.mig.nodepool = %v, want the one scale-up of e2e-kwok-n2-standard-2", increased)
	}
}

// readJSONLines parses each line of path as free JSON.
func readJSONLines(t *testing.T, path string) []any {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []any
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for scanner.Scan() {
		var v any
		if err := json.Unmarshal(scanner.Bytes(), &v); err != nil {
			t.Fatalf("visibility log line %d is not JSON: %v", len(out)+1, err)
		}
		out = append(out, v)
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// fieldPath evaluates a Cloud Logging field path (dot-separated names) on v:
// a name selects an object's field, and a list is searched element by element,
// so the result lists every value the path reaches.
func fieldPath(v any, path string) []any {
	values := []any{v}
	for _, name := range strings.Split(path, ".") {
		var next []any
		for _, x := range flattenLists(values) {
			if obj, ok := x.(map[string]any); ok {
				if field, ok := obj[name]; ok {
					next = append(next, field)
				}
			}
		}
		values = next
	}
	return flattenLists(values)
}

func flattenLists(values []any) []any {
	var out []any
	for _, v := range values {
		if list, ok := v.([]any); ok {
			out = append(out, flattenLists(list)...)
			continue
		}
		out = append(out, v)
	}
	return out
}
