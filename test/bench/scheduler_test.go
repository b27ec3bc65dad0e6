package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/quotascale/quotascale/localcluster"
	"github.com/quotascale/quotascale/scheduler/capacityscheduling"
)

// BenchmarkSchedulerThroughput schedules bare pods on kwok nodes with the same
// in-process kube-scheduler twice: with the CapacityScheduling plugin enforcing an
// ElasticQuotaTree (plugin=on) and as the stock scheduler (plugin=off). The tree
// admits every pod, so the difference is the plugin's cost, not refusals.
//
// One iteration creates all the pods while the scheduler is stopped (so that pod
// creation is not what is measured), starts the scheduler, and times from its
// start to the last pod bound. pods/s is the headline; cpu-us/pod is the CPU the
// whole process (API server, etcd, kwok, scheduler) spent per pod in that window,
// less sensitive than pods/s to a busy machine; B/op and allocs/op are likewise
// process-wide. ext-cores is how many cores other processes kept busy meanwhile:
// on a shared 2-core machine, compare only samples taken at similar ext-cores.
func BenchmarkSchedulerThroughput(b *testing.B) {
	c := cluster(b)
	for _, s := range sizes {
		s.run(b, func(b *testing.B) {
			tree, admitted := s.quotaTree(1)
			setUp(b, c, s, func(ctx context.Context) error { return putTree(ctx, c, tree) })
			on := func() {
				b.Run("plugin=on", func(b *testing.B) {
					measure(b, c, s, variant{name: "on", opts: quotaOptions(b), wantBound: admitted, checkQuota: true})
				})
			}
			off := func() {
				b.Run("plugin=off", func(b *testing.B) {
					measure(b, c, s, variant{name: "off", opts: localcluster.SchedulerOptions{WithoutQuota: true}, wantBound: s.pods})
				})
			}
			// Alternate which variant goes first from one -count round to the
			// next, so that neither always runs on the fresher cluster.
			if rounds[s]++; rounds[s]%2 == 1 {
				on()
				off()
			} else {
				off()
				on()
			}
		})
	}
}

// rounds counts the -count rounds per size.
var rounds = map[size]int{}

// BenchmarkSchedulerRefusals is plugin=on with a tree whose leaves admit 90% of
// their pods: the refused 10% go through PreFilter's refusal message, the
// PostFilter reclaim check (which finds nothing to reclaim: every leaf sits at its
// min) and the unschedulable queue. An iteration ends when every pod is bound
// or marked unschedulable. It is informative only; there is no plugin=off
// counterpart, since the stock scheduler refuses nothing.
func BenchmarkSchedulerRefusals(b *testing.B) {
	c := cluster(b)
	s := sizes[1]
	s.run(b, func(b *testing.B) {
		tree, admitted := s.quotaTree(0.9)
		setUp(b, c, s, func(ctx context.Context) error { return putTree(ctx, c, tree) })
		b.Run(fmt.Sprintf("refused=%dpct", (100*(s.pods-admitted)+s.pods/2)/s.pods), func(b *testing.B) {
			measure(b, c, s, variant{name: "refusing", opts: quotaOptions(b), wantBound: admitted, countRefused: true, checkQuota: true})
		})
	})
}

// quotaOptions is Quotascale's scheduler, the zero SchedulerOptions, unless
// BENCH_STATUS_INTERVAL sets the plugin's statusUpdateInterval: a diagnostic
// that separates the cost of the tree status writes (every 2s by default) from
// the rest of the plugin.
func quotaOptions(b *testing.B) localcluster.SchedulerOptions {
	interval := os.Getenv("BENCH_STATUS_INTERVAL")
	if interval == "" {
		return localcluster.SchedulerOptions{}
	}
	d, err := time.ParseDuration(interval)
	if err != nil {
		b.Fatalf("BENCH_STATUS_INTERVAL: %v", err)
	}
	args, err := json.Marshal(map[string]string{"statusUpdateInterval": d.String()})
	if err != nil {
		b.Fatal(err)
	}
	profile := localcluster.QuotaProfile()
	profile.PluginConfig = []configv1.PluginConfig{{Name: capacityscheduling.Name, Args: runtime.RawExtension{Raw: args}}}
	return localcluster.SchedulerOptions{Config: &configv1.KubeSchedulerConfiguration{Profiles: []configv1.KubeSchedulerProfile{profile}}}
}

// setUp brings the cluster to size s with the scheduler stopped: exactly
// s.nodes Ready nodes, the leaves' namespaces, no benchmark pods, and the tree.
func setUp(b *testing.B, c *localcluster.Cluster, s size, tree func(ctx context.Context) error) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*setupTimeout)
	defer cancel()
	c.StopScheduler()
	if err := deletePods(ctx, c.Client, nil); err != nil {
		b.Fatal(err)
	}
	if err := deleteEvents(ctx, c.Client); err != nil {
		b.Fatal(err)
	}
	if err := ensureNodes(ctx, c, s.nodes); err != nil {
		b.Fatal(err)
	}
	if err := ensureNamespaces(ctx, c.Client, s.leaves()); err != nil {
		b.Fatal(err)
	}
	if err := tree(ctx); err != nil {
		b.Fatal(err)
	}
}

type variant struct {
	name string
	opts localcluster.SchedulerOptions
	// wantBound is how many pods end up bound; the rest are refused.
	wantBound    int
	countRefused bool
	// checkQuota verifies once, from the tree's status, that the plugin charged
	// every bound pod: the plugin really was in the loop.
	checkQuota bool
}

// checkedQuota remembers the sizes and variants whose quota accounting was
// verified, so that -count and b.N re-runs do not wait for status again.
var checkedQuota = map[string]bool{}

// Diagnostics, off by default:
//
//   - BENCH_TIMELINE=1 logs how long every step of an iteration took and when
//     10%, 20%, ... of the pods had settled.
//   - BENCH_STATUS_INTERVAL=1h runs plugin=on with that statusUpdateInterval
//     (see quotaOptions).
//   - BENCH_CPUPROFILE=DIR writes a CPU profile of each measured window alone
//     (DIR/<benchmark>-<iteration>.pprof), without the set-up around it that
//     -cpuprofile also records. Either way, the scheduler's goroutines carry the
//     pprof label bench=scheduler: -tagfocus=bench=scheduler isolates them from
//     the API server, etcd and kwok of the same process.
var (
	timeline      = os.Getenv("BENCH_TIMELINE") != ""
	windowProfile = os.Getenv("BENCH_CPUPROFILE")
)

func measure(b *testing.B, c *localcluster.Cluster, s size, v variant) {
	b.StopTimer()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout+time.Duration(b.N)*(iterationTimeout+2*setupTimeout))
	defer cancel()
	c.StopScheduler()
	if err := deletePods(ctx, c.Client, nil); err != nil {
		b.Fatal(err)
	}
	var elapsed, cpu, ext time.Duration
	for i := range b.N {
		steps := newSteps()
		rv, err := createPods(ctx, c.Client, s)
		if err != nil {
			b.Fatal(err)
		}
		steps.done("create pods")
		iterCtx, iterCancel := context.WithTimeout(ctx, iterationTimeout)
		w, err := watchSettled(iterCtx, c.Client, rv, s.pods, v.countRefused)
		if err != nil {
			iterCancel()
			b.Fatal(err)
		}
		pprof.Do(ctx, pprof.Labels("bench", "scheduler"), func(ctx context.Context) {
			err = c.StartScheduler(ctx, v.opts)
		})
		if err != nil {
			iterCancel()
			b.Fatal(err)
		}
		steps.done("start scheduler")
		writes0, attempts0 := 0, map[string]int{}
		if timeline {
			writes0, attempts0 = treeStatusWrites(), scheduleAttempts()
		}
		stopProfile := startWindowProfile(b, i)
		start, cpu0, busy0 := time.Now(), cpuTime(), busyCPU()
		b.StartTimer()
		<-w.done
		b.StopTimer()
		self := cpuTime() - cpu0
		busy := busyCPU() - busy0
		stopProfile()
		cpu += self
		ext += busy - self
		iterCancel()
		steps.done("schedule")
		writes, attempts := 0, map[string]int{}
		if timeline {
			writes = treeStatusWrites() - writes0
			for result, n := range scheduleAttempts() {
				attempts[result] = n - attempts0[result]
			}
		}
		if w.err != nil {
			b.Fatalf("after %v: %d of %d pods bound, %d refused: %v; a refusal: %s",
				time.Since(start).Round(time.Millisecond), w.bound.Len(), v.wantBound, w.refused.Len(), w.err,
				refusalMessage(ctx, c.Client))
		}
		elapsed += w.at.Sub(start)
		if w.bound.Len() != v.wantBound {
			b.Fatalf("%d pods bound, want %d (%d refused)", w.bound.Len(), v.wantBound, w.refused.Len())
		}
		key := fmt.Sprintf("%+v/%s", s, v.name)
		// The check reads status, which BENCH_STATUS_INTERVAL may hold back.
		if v.checkQuota && !checkedQuota[key] && os.Getenv("BENCH_STATUS_INTERVAL") == "" {
			want := *resource.NewMilliQuantity(int64(v.wantBound)*podCPU.MilliValue(), resource.DecimalSI)
			size, err := waitRootCPUUsed(ctx, c, want)
			if err != nil {
				b.Fatal(err)
			}
			if timeline {
				b.Logf("the ElasticQuotaTree object with status is %d bytes of JSON", size)
			}
			checkedQuota[key] = true
			steps.done("check quota status")
		}
		c.StopScheduler()
		steps.done("stop scheduler")
		if err := deletePods(ctx, c.Client, steps); err != nil {
			b.Fatal(err)
		}
		if timeline {
			deciles := ""
			for _, t := range w.deciles {
				deciles += " " + t.Sub(start).Round(time.Millisecond).String()
			}
			b.Logf("iteration %d: %s; settled 10%%..100%% at:%s; process %.2f cores, others %.2f cores; %d tree status writes; scheduling attempts %v",
				i, steps, deciles, self.Seconds()/w.at.Sub(start).Seconds(), (busy-self).Seconds()/w.at.Sub(start).Seconds(), writes, attempts)
		}
	}
	pods := float64(s.pods * b.N)
	b.ReportMetric(pods/elapsed.Seconds(), "pods/s")
	b.ReportMetric(float64(cpu.Microseconds())/pods, "cpu-us/pod")
	b.ReportMetric(max(0, ext.Seconds()/elapsed.Seconds()), "ext-cores")
}

// steps times the steps of an iteration for BENCH_TIMELINE.
type steps struct {
	last time.Time
	took []string
}

func newSteps() *steps { return &steps{last: time.Now()} }

func (s *steps) done(step string) {
	if s == nil {
		return
	}
	now := time.Now()
	s.took = append(s.took, fmt.Sprintf("%s %v", step, now.Sub(s.last).Round(time.Millisecond)))
	s.last = now
}

func (s *steps) String() string { return strings.Join(s.took, ", ") }

// startWindowProfile starts a CPU profile of one measured window when
// BENCH_CPUPROFILE names a directory, and returns what stops it.
func startWindowProfile(b *testing.B, iteration int) func() {
	if windowProfile == "" {
		return func() {}
	}
	name := strings.NewReplacer("/", "_", "=", "-").Replace(b.Name())
	f, err := os.Create(filepath.Join(windowProfile, fmt.Sprintf("%s-%d.pprof", name, iteration)))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.Fatalf("BENCH_CPUPROFILE: %v (it cannot be combined with -cpuprofile)", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
