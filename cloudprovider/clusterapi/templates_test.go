package clusterapi

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
)

// logLines records the lines of a logger.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

// TestUnreadableTemplateKind (issue 25, item 2): five groups at zero
// replicas whose infrastructure template kind the autoscaler may not list,
// and whose capacity annotations say cpu and memory, are node groups with
// the annotated capacity; the kind's failure is logged once per back-off,
// however many loops read the groups' templates.
func TestUnreadableTemplateKind(t *testing.T) {
	objs := []runtime.Object{infraTemplate(map[string]any{"cpu": "4", "memory": "16Gi"}, nil)}
	for i := range 5 {
		a := sizes("0", "5")
		a[CPUAnnotation], a[MemoryAnnotation] = "2", "8Gi"
		objs = append(objs, withInfraRef(scalable("MachineDeployment", fmt.Sprintf("md-%d", i), a, 0)))
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), fakeListKinds(), objs...)
	client.PrependReactor("list", infraTemplates.Resource, func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(infraTemplates.GroupResource(), "", fmt.Errorf("no RBAC rule"))
	})
	logs := &logLines{}
	logger := funcr.New(func(prefix, args string) {
		logs.mu.Lock()
		defer logs.mu.Unlock()
		logs.lines = append(logs.lines, prefix+" "+args)
	}, funcr.Options{})
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	defer cancel()
	p, err := NewProvider(ctx, Options{Client: client, Discovery: infraDiscovery()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Cleanup() }()

	const failure = "Cannot read infrastructure objects of this kind"
	loop := func() {
		t.Helper()
		if err := p.Refresh(); err != nil {
			t.Fatal(err)
		}
		groups := p.NodeGroups()
		if len(groups) != 5 {
			t.Fatalf("%d node groups, want the 5 at zero replicas", len(groups))
		}
		for _, g := range groups {
			info, err := g.TemplateNodeInfo()
			if err != nil {
				t.Fatalf("%s: %v", g.Id(), err)
			}
			if got := info.Node.Status.Capacity.Cpu().String(); got != "2" {
				t.Errorf("%s: cpu %s, want the annotated 2", g.Id(), got)
			}
		}
	}
	// The informer's list fails in the background; the loops go on meanwhile.
	err = wait.PollUntilContextTimeout(ctx, 0, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		loop()
		return logs.count(failure) > 0, nil
	})
	if err != nil {
		t.Fatalf("the unreadable kind was never reported: %v", err)
	}
	for range 20 {
		loop()
	}
	if got := logs.count(failure); got != 1 {
		t.Errorf("the failure was logged %d times in one back-off, want once", got)
	}
	if got := logs.count("no RBAC rule"); got != 1 {
		t.Errorf("the list error appears in %d log lines, want the back-off's one", got)
	}
}
