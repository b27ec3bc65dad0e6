package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// startEtcd starts a single-member etcd on loopback. embed cannot take
// pre-opened listeners, so it picks free ports and retries when another process
// takes one between the pick and the bind.
func startEtcd(ctx context.Context, dataDir string) (*embed.Etcd, string, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		clientURL, peerURL, err := freeURLs()
		if err != nil {
			return nil, "", err
		}
		cfg := embed.NewConfig()
		cfg.Name = "localcluster"
		cfg.Dir = filepath.Join(dataDir, fmt.Sprintf("etcd-%d", attempt))
		cfg.ListenClientUrls = []url.URL{*clientURL}
		cfg.AdvertiseClientUrls = []url.URL{*clientURL}
		cfg.ListenPeerUrls = []url.URL{*peerURL}
		cfg.AdvertisePeerUrls = []url.URL{*peerURL}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		cfg.UnsafeNoFsync = true
		cfg.LogLevel = "error"
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		// A benchmark creates and deletes tens of thousands of pods between the
		// API server's compactions; the quota is address space, not memory.
		cfg.QuotaBackendBytes = 4 << 30

		e, err := embed.StartEtcd(cfg)
		if err != nil {
			lastErr = err
			if isAddrInUse(err) {
				continue
			}
			return nil, "", fmt.Errorf("starting etcd: %w", err)
		}
		select {
		case <-e.Server.ReadyNotify():
			return e, clientURL.String(), nil
		case err := <-e.Err():
			e.Close()
			return nil, "", fmt.Errorf("etcd failed while starting: %w", err)
		case <-time.After(time.Minute):
			e.Close()
			return nil, "", errors.New("etcd did not become ready within a minute")
		case <-ctx.Done():
			e.Close()
			return nil, "", ctx.Err()
		}
	}
	return nil, "", fmt.Errorf("starting etcd: no free ports after retries: %w", lastErr)
}

func freeURLs() (client, peer *url.URL, err error) {
	ports := make([]int, 2)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, fmt.Errorf("picking a free port: %w", err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		defer l.Close()
	}
	client = &url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	peer = &url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[1])}
	return client, peer, nil
}

func isAddrInUse(err error) bool {
	return strings.Contains(err.Error(), "address already in use")
}
