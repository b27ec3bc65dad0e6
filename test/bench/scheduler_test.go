package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
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
// in-process kube-scheduler (pkg/scheduler.New with the plugin registered, as
// the kube-scheduler binary registers it) with the CapacityScheduling plugin
// enforcing an ElasticQuotaTree (on) and as the stock scheduler (off). Both
// run with preemption on: the stock profile's DefaultPreemption, and in
// Quotascale's profile the plugin's PostFilter, which runs DefaultPreemption
// itself (docs/scheduler-config.yaml). The tree admits every pod, so the
// difference is the plugin's cost, not refusals.
//
// An iteration is BENCH_PAIRS (default 7) pairs: one window with the plugin
// and one without, back to back, in an order that alternates from one pair to
// the next (on-off, off-on, ...) so that neither variant always runs second,
// and both see the same machine at nearly the same time; this shared 2-core
// machine drifts by tens of percent between minutes. Each window creates all
// the pods while the scheduler is stopped (pod creation is not measured),
// starts the scheduler, and times from its start to the last pod bound.
// Before the first pair, one window of each variant runs untimed: the first
// window after the set-up was the slowest of its run in some runs, and it
// was always plugin=on's.
// Each pair's rates and ratio are logged, so that runs can be pooled.
//
// Metrics: on/off, the median over the pairs of the pair's throughput ratio
// (the target is >= 0.95), with on/off-min and on/off-max; on-pods/s and
// off-pods/s, the medians of the windows' rates; cpu-us/pod-on and -off, the
// CPU the whole process (API server, etcd, kwok, scheduler) spent per pod in
// the windows; ext-cores, how many cores other processes kept busy meanwhile.
func BenchmarkSchedulerThroughput(b *testing.B) {
	c := cluster(b)
	perIteration := pairsPerIteration(b)
	for _, s := range sizes {
		s.run(b, func(b *testing.B) {
			tree, admitted := s.quotaTree(1)
			setUp(b, c, s, func(ctx context.Context) error { return putTree(ctx, c, tree) })
			on := variant{name: "on", opts: quotaOptions(b), wantBound: admitted, checkQuota: true}
			off := variant{name: "off", opts: localcluster.SchedulerOptions{WithoutQuota: true}, wantBound: s.pods}
			b.Run("plugin=on-vs-off", func(b *testing.B) {
				b.StopTimer()
				if pairs[s] == 0 {
					// The first windows after the set-up pay for what the
					// control plane builds once (its caches of the new
					// nodes and pods, say): one of each variant runs
					// untimed, so that no pair carries that cost.
					measureOnce(b, c, s, on, -2)
					measureOnce(b, c, s, off, -1)
				}
				var ons, offs []sample
				for range b.N * perIteration {
					first, second := on, off
					if pairs[s]%2 == 1 {
						first, second = off, on
					}
					x, y := measureOnce(b, c, s, first, pairs[s]), measureOnce(b, c, s, second, pairs[s])
					if first.name == off.name {
						x, y = y, x
					}
					ons, offs = append(ons, x), append(offs, y)
					pairs[s]++
				}
				reportPairs(b, s, ons, offs)
			})
		})
	}
}

// pairs counts the pairs measured per size, across -count rounds, so the
// order keeps alternating.
var pairs = map[size]int{}

// pairsPerIteration is BENCH_PAIRS, 7 unless set: the on/off ratio is the
// median of at least that many pairs.
func pairsPerIteration(b *testing.B) int {
	v := os.Getenv("BENCH_PAIRS")
	if v == "" {
		return 7
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("BENCH_PAIRS=%q: want a positive number of pairs", v)
	}
	return n
}

// reportPairs reports the pairs' windows: ons[i] and offs[i] are pair i.
func reportPairs(b *testing.B, s size, ons, offs []sample) {
	var ratios, onRates, offRates []float64
	var onTotal, offTotal sample
	for i := range ons {
		onRate, offRate := float64(s.pods)/ons[i].elapsed.Seconds(), float64(s.pods)/offs[i].elapsed.Seconds()
		onRates, offRates = append(onRates, onRate), append(offRates, offRate)
		ratios = append(ratios, onRate/offRate)
		b.Logf("pair %d: on %.1f pods/s, off %.1f pods/s, on/off %.3f", i, onRate, offRate, onRate/offRate)
		add(&onTotal, ons[i])
		add(&offTotal, offs[i])
	}
	pods := float64(s.pods * len(ons))
	b.ReportMetric(median(ratios), "on/off")
	b.ReportMetric(slices.Min(ratios), "on/off-min")
	b.ReportMetric(slices.Max(ratios), "on/off-max")
	b.ReportMetric(float64(len(ratios)), "pairs")
	b.ReportMetric(median(onRates), "on-pods/s")
	b.ReportMetric(median(offRates), "off-pods/s")
	b.ReportMetric(float64(onTotal.cpu.Microseconds())/pods, "cpu-us/pod-on")
	b.ReportMetric(float64(offTotal.cpu.Microseconds())/pods, "cpu-us/pod-off")
	b.ReportMetric(max(0, (onTotal.ext+offTotal.ext).Seconds()/(onTotal.elapsed+offTotal.elapsed).Seconds()), "ext-cores")
}

// median of v, which it sorts.
func median(v []float64) float64 {
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func add(total *sample, s sample) {
	total.elapsed += s.elapsed
	total.cpu += s.cpu
	total.ext += s.ext
}

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

// sample is what one scheduling window measured.
type sample struct {
	elapsed, cpu, ext time.Duration
}

// measure runs b.N iterations of v and reports them.
func measure(b *testing.B, c *localcluster.Cluster, s size, v variant) {
	b.StopTimer()
	var total sample
	for i := range b.N {
		got := measureOnce(b, c, s, v, i)
		total.elapsed += got.elapsed
		total.cpu += got.cpu
		total.ext += got.ext
	}
	pods := float64(s.pods * b.N)
	b.ReportMetric(pods/total.elapsed.Seconds(), "pods/s")
	b.ReportMetric(float64(total.cpu.Microseconds())/pods, "cpu-us/pod")
	b.ReportMetric(max(0, total.ext.Seconds()/total.elapsed.Seconds()), "ext-cores")
}

// measureOnce creates the pods with the scheduler stopped, starts v's
// scheduler and times from its start to the last pod settled, then deletes the
// pods. The timer runs only in that window.
func measureOnce(b *testing.B, c *localcluster.Cluster, s size, v variant, iteration int) sample {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), iterationTimeout+3*setupTimeout)
	defer cancel()
	c.StopScheduler()
	if err := deletePods(ctx, c.Client, nil); err != nil {
		b.Fatal(err)
	}
	steps := newSteps()
	rv, err := createPods(ctx, c.Client, s)
	if err != nil {
		b.Fatal(err)
	}
	steps.done("create pods")
	iterCtx, iterCancel := context.WithTimeout(ctx, iterationTimeout)
	defer iterCancel()
	w, err := watchSettled(iterCtx, c.Client, rv, s.pods, v.countRefused)
	if err != nil {
		b.Fatal(err)
	}
	pprof.Do(ctx, pprof.Labels("bench", "scheduler"), func(ctx context.Context) {
		err = c.StartScheduler(ctx, v.opts)
	})
	if err != nil {
		b.Fatal(err)
	}
	steps.done("start scheduler " + v.name)
	writes0, attempts0 := 0, map[string]int{}
	if timeline {
		writes0, attempts0 = treeStatusWrites(), scheduleAttempts()
	}
	stopProfile := startWindowProfile(b, v.name, iteration)
	start, cpu0, busy0 := time.Now(), cpuTime(), busyCPU()
	b.StartTimer()
	<-w.done
	b.StopTimer()
	self := cpuTime() - cpu0
	busy := busyCPU() - busy0
	stopProfile()
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
	elapsed := w.at.Sub(start)
	if timeline {
		deciles := ""
		for _, t := range w.deciles {
			deciles += " " + t.Sub(start).Round(time.Millisecond).String()
		}
		b.Logf("iteration %d: %s; settled 10%%..100%% at:%s; process %.2f cores, others %.2f cores; %d tree status writes; scheduling attempts %v",
			iteration, steps, deciles, self.Seconds()/elapsed.Seconds(), (busy-self).Seconds()/elapsed.Seconds(), writes, attempts)
	}
	return sample{elapsed: elapsed, cpu: self, ext: busy - self}
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
func startWindowProfile(b *testing.B, variant string, iteration int) func() {
	if windowProfile == "" {
		return func() {}
	}
	name := strings.NewReplacer("/", "_", "=", "-").Replace(b.Name() + "/" + variant)
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
