package kwok

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ConfigSource yields the current config. Load is called on every provider
// Refresh and every backend pass, so a source must be cheap when nothing
// changed; the sources here re-parse only when the content changes.
type ConfigSource interface {
	Load(ctx context.Context) (*Config, error)
	// String names the source in errors and logs.
	String() string
}

// DefaultConfigKey is the ConfigMap key a ConfigMap source reads by default.
const DefaultConfigKey = "config.yaml"

// NewFileSource reads the config from a YAML or JSON file.
func NewFileSource(path string) ConfigSource {
	return &fileSource{path: path}
}

type fileSource struct {
	path string
	mu   sync.Mutex
	raw  []byte
	cfg  *Config
}

func (s *fileSource) String() string { return "file " + s.path }

func (s *fileSource) Load(context.Context) (*Config, error) {
	raw, err := os.ReadFile(s.path)
	if err != nil {
		return nil, fmt.Errorf("reading kwok cloud config %s: %w", s.path, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg != nil && bytes.Equal(raw, s.raw) {
		return s.cfg, nil
	}
	cfg, err := ParseConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.path, err)
	}
	s.raw, s.cfg = raw, cfg
	return cfg, nil
}

// NewConfigMapSource reads the config from a key of a ConfigMap; key defaults to
// DefaultConfigKey. Editing the ConfigMap changes the cloud at run time.
func NewConfigMapSource(client kubernetes.Interface, namespace, name, key string) ConfigSource {
	if key == "" {
		key = DefaultConfigKey
	}
	return &configMapSource{client: client, namespace: namespace, name: name, key: key}
}

type configMapSource struct {
	client               kubernetes.Interface
	namespace, name, key string
	mu                   sync.Mutex
	resourceVersion      string
	cfg                  *Config
}

func (s *configMapSource) String() string {
	return fmt.Sprintf("ConfigMap %s/%s key %s", s.namespace, s.name, s.key)
}

func (s *configMapSource) Load(ctx context.Context) (*Config, error) {
	cm, err := s.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading kwok cloud config from %s: %w", s, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg != nil && cm.ResourceVersion != "" && cm.ResourceVersion == s.resourceVersion {
		return s.cfg, nil
	}
	raw, ok := cm.Data[s.key]
	if !ok {
		return nil, fmt.Errorf("reading kwok cloud config from %s: the key is missing", s)
	}
	cfg, err := ParseConfig([]byte(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s, err)
	}
	s.resourceVersion, s.cfg = cm.ResourceVersion, cfg
	return cfg, nil
}

// StaticSource holds a config in memory, for tests and in-process demos; Set
// replaces it at run time.
type StaticSource struct {
	mu  sync.Mutex
	cfg *Config
}

// NewStaticSource validates cfg and returns a source serving it.
func NewStaticSource(cfg *Config) (*StaticSource, error) {
	s := &StaticSource{}
	if err := s.Set(cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// Set validates cfg and serves it from now on; an invalid cfg is refused and the
// previous one stays.
func (s *StaticSource) Set(cfg *Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg = cfg
	return nil
}

func (s *StaticSource) Load(context.Context) (*Config, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg, nil
}

func (s *StaticSource) String() string { return "in-memory config" }

// ParseSourceRef turns a flag value into a source: "configmap:NAMESPACE/NAME" or
// "configmap:NAMESPACE/NAME/KEY" reads a ConfigMap, anything else is a file path.
func ParseSourceRef(ref string, client kubernetes.Interface) (ConfigSource, error) {
	rest, ok := strings.CutPrefix(ref, "configmap:")
	if !ok {
		if ref == "" {
			return nil, fmt.Errorf("kwok cloud config: no file or ConfigMap given")
		}
		return NewFileSource(ref), nil
	}
	parts := strings.Split(rest, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" || (len(parts) == 3 && parts[2] == "") {
		return nil, fmt.Errorf("kwok cloud config %q: want configmap:NAMESPACE/NAME or configmap:NAMESPACE/NAME/KEY", ref)
	}
	if client == nil {
		return nil, fmt.Errorf("kwok cloud config %q: a ConfigMap source needs a client", ref)
	}
	key := ""
	if len(parts) == 3 {
		key = parts[2]
	}
	return NewConfigMapSource(client, parts[0], parts[1], key), nil
}
