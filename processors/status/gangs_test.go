package status

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/quotascale/quotascale/processors"
	"github.com/quotascale/quotascale/quota/gang"
)

var trainGang = &gang.Gang{Key: gang.Key{Kind: gang.KindPodGroup, Namespace: "ns", Name: "train"}, MinCount: 3}

const gangQuota = `exceeded quota: "CapacityQuota/pool", resources: cpu`

// gangStatus is a loop that left a gang without nodes for a quota, and
// refused another gang's pod.
func gangStatus() *processors.ScaleUpStatus {
	return &processors.ScaleUpStatus{
		Result: processors.ScaleUpNoOptionsAvailable,
		PodsRemainUnschedulable: []processors.NoScaleUpInfo{{
			Pods: []*corev1.Pod{pod("train-0")}, Skipped: map[string][]processors.Reason{"grp": reasons(gangQuota)}, Gang: trainGang,
		}},
		Refused: []processors.RefusedPod{{Pod: pod("train-1"), Gang: trainGang,
			Reason: processors.NewReason(processors.MessagePodRefused, `exceeded elastic quota: "ElasticQuotaTree/root.a", resources: cpu`)}},
	}
}

// TestGangEvents: a gang's pods get upstream's messages with the gang after
// them.
func TestGangEvents(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	(&EventProcessor{Recorder: rec}).Process(context.Background(), &processors.LoopContext{}, gangStatus())
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	want := []string{
		`Normal NotTriggerScaleUp pod didn't trigger scale-up: 1 ` + gangQuota + ` (gang ns/train: 3 pods scale up together)`,
		`Normal NotTriggerScaleUp pod didn't trigger scale-up: exceeded elastic quota: "ElasticQuotaTree/root.a", resources: cpu (gang ns/train: 3 pods scale up together)`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestGangVisibility: both formats name the gang of each unhandled pod group,
// and GKE's, which lists skipped MIGs only for the whole entry, also the MIGs
// that skipped the gang and why.
func TestGangVisibility(t *testing.T) {
	for _, tc := range []struct {
		format VisibilityFormat
		want   []string
	}{
		{FormatQuotascale, []string{
			`"gang":{"kind":"PodGroup","namespace":"ns","name":"train","minCount":3}`,
		}},
		{FormatGKE, []string{
			`"gang":{"kind":"PodGroup","namespace":"ns","name":"train","minCount":3,"skippedMigs":[{"mig":{"name":"grp","nodepool":"grp"},"reason":{"messageId":"no.scale.up.mig.skipped","parameters":["exceeded quota: \"CapacityQuota/pool\", resources: cpu"]}}]}`,
			`"gang":{"kind":"PodGroup","namespace":"ns","name":"train","minCount":3}`,
		}},
	} {
		t.Run(string(tc.format), func(t *testing.T) {
			var buf bytes.Buffer
			v := NewVisibilityLog(&buf, tc.format)
			v.Process(context.Background(), &processors.LoopContext{Now: time.Unix(0, 0)}, gangStatus())
			if !json.Valid(bytes.TrimSpace(buf.Bytes())) {
				t.Fatalf("not one JSON line: %s", buf.String())
			}
			for _, w := range tc.want {
				if n := strings.Count(buf.String(), w); n == 0 {
					t.Errorf("no %s in\n%s", w, buf.String())
				}
			}
			if n := strings.Count(buf.String(), `"gang":`); n != 2 {
				t.Errorf("%d gangs named, want 2 (the skipped pod group and the refused pod):\n%s", n, buf.String())
			}
		})
	}
}
