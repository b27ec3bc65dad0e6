package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// apiProxy stands between the cluster's clients and kube-apiserver, so a test
// can take the API server away from every component at once (an outage, as a
// crashed or partitioned API server looks from outside) and bring it back, while
// etcd and the server's own state stay intact. TLS passes through untouched.
type apiProxy struct {
	listener net.Listener
	target   string

	mu      sync.Mutex
	down    bool
	conns   map[net.Conn]struct{}
	stopped bool
}

func startAPIProxy(target string) (*apiProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the API proxy: %w", err)
	}
	p := &apiProxy{listener: l, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	return p, nil
}

func (p *apiProxy) addr() string { return p.listener.Addr().String() }

func (p *apiProxy) serve() {
	for {
		client, err := p.listener.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down || p.stopped {
			p.mu.Unlock()
			_ = client.Close()
			continue
		}
		p.conns[client] = struct{}{}
		p.mu.Unlock()
		go p.forward(client)
	}
}

func (p *apiProxy) forward(client net.Conn) {
	defer p.drop(client)
	server, err := (&net.Dialer{}).DialContext(context.Background(), "tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.down || p.stopped {
		p.mu.Unlock()
		_ = server.Close()
		return
	}
	p.conns[server] = struct{}{}
	p.mu.Unlock()
	defer p.drop(server)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done
}

func (p *apiProxy) drop(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// setDown cuts every open connection and refuses new ones, or lets them through
// again.
func (p *apiProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			_ = c.Close()
		}
	}
}

func (p *apiProxy) stop() {
	p.mu.Lock()
	p.stopped = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	if err := p.listener.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return
	}
}
