package session

import (
	"context"
	"fmt"
	"net"
	"syscall"
)

// deferAcceptSeconds is how long the kernel holds a connection whose
// client has sent nothing before it hands it over anyway (Linux rounds it
// to its SYN-ACK retransmission schedule). A client that connects and
// stays silent past it is then bounded by the HTTP server's header
// timeout, as without the option.
const deferAcceptSeconds = 10

// Listen listens on the TCP address addr for a Server's HTTP server. On
// Linux the listener accepts a connection only once its client has sent
// something (TCP_DEFER_ACCEPT): until then the kernel holds it, not the
// process. net/http gives every accepted connection a goroutine, a 4 KiB
// read and a 4 KiB write buffer as soon as it is accepted, before the
// request arrives; in a burst of upgrades from a busy client, most of the
// burst's memory was connections waiting there for their request (1,405
// of 1,415 goroutines in a dump taken during 5,000 upgrades), and that
// memory sets the process's peak. Elsewhere it is net.Listen.
func Listen(ctx context.Context, addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: deferAccept}
	return lc.Listen(ctx, "tcp", addr) // its error says "listen tcp ADDR: ..."
}

// deferAccept sets the listening socket's option that holds a connection
// until its client's first bytes arrive, where the system has one.
func deferAccept(_, _ string, rc syscall.RawConn) error {
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = setDeferAccept(fd, deferAcceptSeconds) }); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("TCP_DEFER_ACCEPT: %w", serr)
	}
	return nil
}
