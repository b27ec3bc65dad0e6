package kwok

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

const (
	// DefaultStateNamespace and DefaultStateName locate the ConfigMap in which
	// the kwok cloud keeps its instances. It lives in the cluster, not in the
	// autoscaler, so that an autoscaler restart loses nothing.
	DefaultStateNamespace = "kube-system"
	DefaultStateName      = "quotascale-kwok-cloud"

	// NodeGroupLabel names the node group on the cloud's nodes and templates.
	NodeGroupLabel = "quotascale.io/node-group"
	// NodeAnnotation set to "fake" makes kwok play the kubelet for a node. It
	// must equal localcluster.KwokNodeAnnotation (an e2e test checks); it is
	// repeated here because cloudprovider must not import localcluster.
	NodeAnnotation      = "kwok.x-k8s.io/node"
	nodeAnnotationValue = "fake"
	// ProviderIDPrefix starts every instance ID: kwok://GROUP/INSTANCE, which is
	// also the node's spec.providerID.
	ProviderIDPrefix = "kwok://"

	managedByLabel = "app.kubernetes.io/managed-by"
	managedByValue = "quotascale-kwok-cloud"
)

// instanceState is an instance's state as stored.
type instanceState string

const (
	// stateCreating: asked for, not provisioned yet.
	stateCreating instanceState = "Creating"
	// stateRunning: provisioned; the backend keeps its node in place.
	stateRunning instanceState = "Running"
	// stateFailed: creation failed; the error fields say why. It counts towards
	// the target size until the autoscaler deletes it, as in real clouds.
	stateFailed instanceState = "Failed"
	// stateDeleting: the backend deletes the node, then forgets the instance.
	stateDeleting instanceState = "Deleting"
)

// instanceRecord is one instance in the state ConfigMap.
type instanceRecord struct {
	ID           string        `json:"id"`
	State        instanceState `json:"state"`
	CreatedAt    time.Time     `json:"createdAt"`
	ErrorClass   string        `json:"errorClass,omitempty"`
	ErrorCode    string        `json:"errorCode,omitempty"`
	ErrorMessage string        `json:"errorMessage,omitempty"`
}

// name is the instance's node name.
func (r instanceRecord) name() string {
	_, name, _ := parseProviderID(r.ID)
	return name
}

// groupState is the value of one group's key in the state ConfigMap.
type groupState struct {
	Instances []instanceRecord `json:"instances"`
}

// targetSize counts the instances that are not being deleted.
func (g *groupState) targetSize() int {
	n := 0
	for _, in := range g.Instances {
		if in.State != stateDeleting {
			n++
		}
	}
	return n
}

func (g *groupState) count(state instanceState) int {
	n := 0
	for _, in := range g.Instances {
		if in.State == state {
			n++
		}
	}
	return n
}

// cloudState is the decoded state ConfigMap: one groupState per group key.
type cloudState struct {
	groups map[string]*groupState
}

func (s *cloudState) group(name string) *groupState {
	g, ok := s.groups[name]
	if !ok {
		g = &groupState{}
		s.groups[name] = g
	}
	return g
}

func (s *cloudState) names() map[string]bool {
	out := map[string]bool{}
	for _, g := range s.groups {
		for _, in := range g.Instances {
			out[in.name()] = true
		}
	}
	return out
}

func providerID(group, name string) string { return ProviderIDPrefix + group + "/" + name }

// parseProviderID splits kwok://GROUP/NAME.
func parseProviderID(id string) (group, name string, ok bool) {
	rest, found := strings.CutPrefix(id, ProviderIDPrefix)
	if !found {
		return "", "", false
	}
	group, name, found = strings.Cut(rest, "/")
	if !found || group == "" || name == "" || strings.Contains(name, "/") {
		return "", "", false
	}
	return group, name, true
}

// stateStore reads and writes the state ConfigMap with optimistic concurrency:
// the provider (autoscaler) and the backend (cloud) both write it.
type stateStore struct {
	client          kubernetes.Interface
	namespace, name string
}

func (s *stateStore) String() string { return "ConfigMap " + s.namespace + "/" + s.name }

// read returns the state; a missing ConfigMap is an empty cloud.
func (s *stateStore) read(ctx context.Context) (*cloudState, error) {
	cm, err := s.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &cloudState{groups: map[string]*groupState{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading kwok cloud state %s: %w", s, err)
	}
	return s.decode(cm)
}

// update applies mutate to a fresh read and writes the result, retrying on
// conflicts so that concurrent writers never lose each other's changes. An error
// from mutate aborts without writing. Nothing is written when nothing changed.
func (s *stateStore) update(ctx context.Context, mutate func(*cloudState) error) (*cloudState, error) {
	var result *cloudState
	err := retry.OnError(retry.DefaultRetry, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, func() error {
		cm, err := s.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = nil
		} else if err != nil {
			return fmt.Errorf("reading kwok cloud state %s: %w", s, err)
		}
		st, err := s.decode(cm)
		if err != nil {
			return err
		}
		if err := mutate(st); err != nil {
			return err
		}
		data, err := encodeState(st)
		if err != nil {
			return fmt.Errorf("encoding kwok cloud state %s: %w", s, err)
		}
		switch {
		case cm == nil && len(data) == 0:
		case cm == nil:
			cm = &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: s.name, Labels: map[string]string{managedByLabel: managedByValue}},
				Data:       data,
			}
			if _, err := s.client.CoreV1().ConfigMaps(s.namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating kwok cloud state %s: %w", s, err)
			}
		case !maps.Equal(cm.Data, data):
			cm = cm.DeepCopy()
			cm.Data = data
			if _, err := s.client.CoreV1().ConfigMaps(s.namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("updating kwok cloud state %s: %w", s, err)
			}
		}
		result = st
		return nil
	})
	if err != nil {
		return nil, err
	}
	return result, nil
}

func (s *stateStore) decode(cm *corev1.ConfigMap) (*cloudState, error) {
	st := &cloudState{groups: map[string]*groupState{}}
	if cm == nil {
		return st, nil
	}
	for key, value := range cm.Data {
		g := &groupState{}
		if err := json.Unmarshal([]byte(value), g); err != nil {
			return nil, fmt.Errorf("decoding kwok cloud state %s key %s: %w", s, key, err)
		}
		st.groups[key] = g
	}
	return st, nil
}

// encodeState writes one key per group with instances, instances oldest first,
// so that the stored text is deterministic.
func encodeState(st *cloudState) (map[string]string, error) {
	data := map[string]string{}
	for name, g := range st.groups {
		if len(g.Instances) == 0 {
			continue
		}
		sort.SliceStable(g.Instances, func(i, j int) bool {
			a, b := g.Instances[i], g.Instances[j]
			if !a.CreatedAt.Equal(b.CreatedAt) {
				return a.CreatedAt.Before(b.CreatedAt)
			}
			return a.ID < b.ID
		})
		raw, err := json.Marshal(g)
		if err != nil {
			return nil, err
		}
		data[name] = string(raw)
	}
	return data, nil
}
