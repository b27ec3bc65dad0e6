package kwok

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Cloud is the kwok cloud's infrastructure: it turns the instance records the
// Provider writes into kwok nodes. Each pass
//   - deletes the node of every Deleting instance, then forgets the instance;
//   - moves every Creating instance whose provisioning delay has passed to
//     Running, or to Failed when the group's config injects failures;
//   - creates the missing node of every Running instance.
//
// An instance becomes Running in the state before its node is created, so a
// Provider that cancels a Creating instance (DecreaseTargetSize) either wins the
// write, and no node is made, or loses it and sees a Running instance: a node
// never exists without its instance. Every step is idempotent, so a Cloud that
// stops anywhere resumes where it was.
type Cloud struct {
	client   kubernetes.Interface
	source   ConfigSource
	store    *stateStore
	clock    clock.PassiveClock
	interval time.Duration

	// config is the last valid config; an invalid one is logged and ignored.
	config *compiled
}

// NewCloud checks that the config loads and returns a Cloud; Run starts it.
func NewCloud(ctx context.Context, opts Options) (*Cloud, error) {
	store, err := opts.complete()
	if err != nil {
		return nil, err
	}
	c := &Cloud{client: opts.Client, source: opts.Config, store: store, clock: opts.Clock, interval: opts.PollInterval}
	cfg, err := c.source.Load(ctx)
	if err != nil {
		return nil, err
	}
	if c.config, err = cfg.compile(); err != nil {
		return nil, fmt.Errorf("%s: %w", c.source, err)
	}
	return c, nil
}

// Run reconciles every poll interval until ctx is cancelled. A failed pass is
// logged and retried on the next one.
func (c *Cloud) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("kwokCloud", c.store.String())
	logger.V(1).Info("Starting the kwok cloud", "interval", c.interval)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.Reconcile(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "kwok cloud pass failed")
		}
	}, c.interval)
	logger.V(1).Info("Stopped the kwok cloud")
}

// Reconcile makes one pass; see Cloud.
func (c *Cloud) Reconcile(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("kwokCloud", c.store.String())
	c.reloadConfig(ctx, logger)
	state, err := c.store.read(ctx)
	if err != nil {
		return err
	}

	var errs []error
	deleted := map[string]bool{}
	for _, gs := range state.groups {
		for _, in := range gs.Instances {
			if in.State != stateDeleting {
				continue
			}
			if err := DeleteNode(ctx, c.client, in.name()); err != nil {
				errs = append(errs, err)
				continue
			}
			deleted[in.ID] = true
		}
	}

	now := c.clock.Now()
	cfg := c.config
	var transitions []string
	state, err = c.store.update(ctx, func(st *cloudState) error {
		transitions = transitions[:0]
		for name, gs := range st.groups {
			spec := cfg.groups[name]
			running := gs.count(stateRunning)
			kept := gs.Instances[:0:0]
			for _, in := range gs.Instances {
				switch {
				case in.State == stateDeleting && deleted[in.ID]:
					transitions = append(transitions, in.ID+": deleted")
					continue
				case in.State != stateCreating || spec == nil || now.Before(in.CreatedAt.Add(spec.delay)):
				case spec.failures != nil && running >= spec.failures.failAfter:
					f := spec.failures
					in.State, in.ErrorClass, in.ErrorCode, in.ErrorMessage = stateFailed, f.class, f.code, f.message
					transitions = append(transitions, in.ID+": failed "+f.code)
				default:
					in.State = stateRunning
					running++
					transitions = append(transitions, in.ID+": running")
				}
				kept = append(kept, in)
			}
			gs.Instances = kept
		}
		return nil
	})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if len(transitions) > 0 {
		sort.Strings(transitions)
		logger.V(2).Info("kwok instances changed", "changes", transitions)
	}

	if err := c.ensureNodes(ctx, state, logger); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (c *Cloud) reloadConfig(ctx context.Context, logger klog.Logger) {
	cfg, err := c.source.Load(ctx)
	if err != nil {
		logger.Error(err, "Keeping the last valid kwok cloud config", "source", c.source.String())
		return
	}
	compiledCfg, err := cfg.compile()
	if err != nil {
		logger.Error(err, "Keeping the last valid kwok cloud config", "source", c.source.String())
		return
	}
	c.config = compiledCfg
}

// ensureNodes creates the node of every Running instance that has none.
func (c *Cloud) ensureNodes(ctx context.Context, state *cloudState, logger klog.Logger) error {
	nodes, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: NodeGroupLabel})
	if err != nil {
		return fmt.Errorf("listing kwok cloud nodes: %w", err)
	}
	exists := map[string]bool{}
	for _, n := range nodes.Items {
		exists[n.Name] = true
	}
	var errs []error
	for group, gs := range state.groups {
		spec := c.config.groups[group]
		for _, in := range gs.Instances {
			if in.State != stateRunning || exists[in.name()] {
				continue
			}
			if spec == nil {
				logger.Info("Cannot create the node of an instance whose node group is not configured", "instance", in.ID)
				continue
			}
			_, err := c.client.CoreV1().Nodes().Create(ctx, spec.node(in.name(), in.ID), metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				errs = append(errs, fmt.Errorf("creating node %s of instance %s: %w", in.name(), in.ID, err))
				continue
			}
			logger.V(2).Info("Created kwok node", "node", in.name(), "instance", in.ID)
		}
	}
	return errors.Join(errs...)
}

// DeleteNode deletes a node and, standing in for the pod garbage collector
// that localcluster does not run, the pods bound to it: what a cloud's
// terminated instance leaves behind once the node lifecycle controller and
// the pod GC are done. localcluster's Cluster API machines go the same way.
func DeleteNode(ctx context.Context, client kubernetes.Interface, name string) error {
	err := client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting node %s: %w", name, err)
	}
	pods, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
	if err != nil {
		return fmt.Errorf("listing the pods of deleted node %s: %w", name, err)
	}
	for _, pod := range pods.Items {
		if pod.Spec.NodeName != name {
			continue // field selectors are not honoured everywhere (fake clients)
		}
		err := client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting pod %s/%s of deleted node %s: %w", pod.Namespace, pod.Name, name, err)
		}
	}
	return nil
}
