package sandbox

import (
	"fmt"
	"net"
)

// freePorts asks the kernel for n distinct free TCP ports on 127.0.0.1. All
// listeners are held open until every port is known, so the n are distinct; the
// window between closing them and a component binding is small, and Start
// reports a bind failure with the component's log.
func freePorts(n int) ([]int, error) {
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		listeners = append(listeners, l)
		addr, ok := l.Addr().(*net.TCPAddr)
		if !ok {
			return nil, fmt.Errorf("finding a free port: unexpected address %v", l.Addr())
		}
		ports = append(ports, addr.Port)
	}
	return ports, nil
}
