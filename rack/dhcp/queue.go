package dhcp

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// datagram is a received packet waiting for a worker.
type datagram struct {
	l    *listener
	data []byte
}

// queue is a bounded FIFO between the socket readers and the workers. When it is full the
// oldest datagram is dropped: under overload its client has likely given up or
// retransmitted already, so fresh requests are the ones worth answering.
type queue struct {
	mu      sync.Mutex
	ready   sync.Cond
	ring    []datagram
	head, n int
	closed  bool
	depth   prometheus.Gauge
	dropped prometheus.Counter
}

func newQueue(capacity int, depth prometheus.Gauge, dropped prometheus.Counter) *queue {
	q := &queue{ring: make([]datagram, capacity), depth: depth, dropped: dropped}
	q.ready.L = &q.mu
	return q
}

// push appends d, dropping the oldest datagram when the queue is full.
func (q *queue) push(d datagram) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if q.n == len(q.ring) {
		q.ring[q.head] = datagram{}
		q.head = (q.head + 1) % len(q.ring)
		q.n--
		q.dropped.Inc()
	}
	q.ring[(q.head+q.n)%len(q.ring)] = d
	q.n++
	q.depth.Set(float64(q.n))
	q.ready.Signal()
}

// pop returns the oldest datagram, waiting for one; false once the queue is closed.
func (q *queue) pop() (datagram, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.n == 0 && !q.closed {
		q.ready.Wait()
	}
	if q.closed {
		return datagram{}, false
	}
	d := q.ring[q.head]
	q.ring[q.head] = datagram{}
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	q.depth.Set(float64(q.n))
	return d, true
}

// close wakes the workers and discards what is still queued.
func (q *queue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.n = 0
	clear(q.ring)
	q.depth.Set(0)
	q.ready.Broadcast()
}
