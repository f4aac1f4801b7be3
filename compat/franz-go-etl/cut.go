// Cutting a member's fetch connections, as a dropped connection does.
//
// franz-go fetches on a connection of its own. When that connection ends
// (a rebalance cancels a fetch in flight, a network fault), franz-go backs
// off and fetches on a new connection with a full fetch (epoch 0) naming
// the fetch session of the old one; a broker serves it and opens a new
// session. A member here cuts its fetch connections while it processes,
// so that every chain goes through such reconnects:
//
//	poll with records -> produce, commit -> cut: ss -K on the client end
//	of each connection that carried a Fetch -> franz-go's next fetch fails,
//	it backs off (about 250 ms) and fetches (session S, epoch 0) on a new
//	connection
//
// The cut is `ss -K` (the kernel aborts the socket and sends the peer a
// RST); where the kernel cannot destroy sockets (not root, no
// CONFIG_INET_DIAG_DESTROY) the connection is closed in the process
// instead, which ends it the same way for franz-go.
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// fetchKey is the Kafka API key of Fetch.
const fetchKey = 1

// Cuts counts the fetch connections cut, by how.
type Cuts struct {
	Killed atomic.Int64 // destroyed with ss -K
	Closed atomic.Int64 // closed in the process (ss -K could not)
}

func (c *Cuts) total() int64 { return c.Killed.Load() + c.Closed.Load() }

var cuts Cuts

// tapConn is a connection that notes whether it ever carried a Fetch.
// franz-go writes each request with one Write: a frame's bytes 4..6 are
// its API key.
type tapConn struct {
	net.Conn
	fetch atomic.Bool
}

func (c *tapConn) Write(p []byte) (int, error) {
	if len(p) >= 6 && binary.BigEndian.Uint16(p[4:6]) == fetchKey {
		c.fetch.Store(true)
	}
	return c.Conn.Write(p)
}

// conns is one client's connections, for its dialer.
type conns struct {
	mu   sync.Mutex
	list []*tapConn
}

func (cs *conns) dial(ctx context.Context, network, host string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	t := &tapConn{Conn: c}
	cs.mu.Lock()
	cs.list = append(cs.list, t)
	cs.mu.Unlock()
	return t, nil
}

// cutFetch cuts every open connection of the client that carried a Fetch,
// and forgets them (a cut connection is not cut again); returns how many.
func (cs *conns) cutFetch(chain *Cuts) int {
	cs.mu.Lock()
	var fetch []*tapConn
	kept := cs.list[:0]
	for _, c := range cs.list {
		if c.fetch.Load() {
			fetch = append(fetch, c)
		} else {
			kept = append(kept, c)
		}
	}
	cs.list = kept
	cs.mu.Unlock()
	n := 0
	for _, c := range fetch {
		local, lok := c.LocalAddr().(*net.TCPAddr)
		remote, rok := c.RemoteAddr().(*net.TCPAddr)
		if !lok || !rok {
			continue
		}
		if !open(local.Port, remote.Port) {
			continue // franz-go already ended it
		}
		n++
		if destroy(local.Port, remote.Port) {
			cuts.Killed.Add(1)
			chain.Killed.Add(1)
		} else {
			_ = c.Conn.Close()
			cuts.Closed.Add(1)
			chain.Closed.Add(1)
		}
	}
	return n
}

// filter selects the client end of the connection from local to remote.
func filter(local, remote int) string {
	return fmt.Sprintf("( sport = :%d and dport = :%d )", local, remote)
}

// open says whether the connection from local to remote is established.
func open(local, remote int) bool {
	out, err := exec.Command("ss", "-Htn", "state", "established", filter(local, remote)).Output()
	return err != nil || strings.TrimSpace(string(out)) != ""
}

// destroy destroys the client end of the connection with ss -K and says
// whether it is gone.
func destroy(local, remote int) bool {
	if err := exec.Command("ss", "-K", "-tn", "state", "established", filter(local, remote)).Run(); err != nil {
		return false
	}
	out, err := exec.Command("ss", "-Htn", "state", "established", filter(local, remote)).Output()
	return err == nil && strings.TrimSpace(string(out)) == ""
}

// cutter cuts a member's fetch connections after its first poll with
// records is processed, and then every --cut-every while it processes.
type cutter struct {
	conns conns
	chain *Cuts
	last  time.Time
}

// processed is called after a poll's records were produced and committed.
func (c *cutter) processed() {
	if *cutEvery <= 0 || (!c.last.IsZero() && time.Since(c.last) < *cutEvery) {
		return
	}
	c.last = time.Now()
	c.conns.cutFetch(c.chain)
}
