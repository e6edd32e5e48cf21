package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
)

// Limits on what Redis may make this process allocate. go-redis sizes its
// buffers from the lengths a reply declares before it reads a byte of them:
// an endpoint answering "*2000000000" made it allocate 4.9 GiB in 4 s, and a
// "$" length or a line without an end does the same. Every connection to
// Redis is read through a replyLimiter, which checks the replies as they
// arrive and fails the connection (and so the round, which then routes on
// local data) at the first one past these limits.
const (
	// maxReplyBytes bounds what the replies to one request (a command or a
	// pipeline) may declare: the bytes of their bulk strings plus
	// replyElemCost per array element. A round's largest request is one
	// XREAD of 16 stream entries, so an entry may hold 4 MiB (see
	// streamBatch).
	maxReplyBytes = 64 << 20
	// maxReplyLine bounds a status, error or integer line.
	maxReplyLine = 64 << 10
	// replyElemCost is what one declared array element may cost go-redis
	// (an interface value, a map slot, a message header), in bytes.
	replyElemCost = 64
)

// ErrReplyTooLarge is the error a connection to Redis fails with when a
// reply declares more than 64 MiB (bulk bytes plus 64 bytes per array
// element), or a line longer than 64 KiB.
var ErrReplyTooLarge = errors.New("fleet: Redis reply too large")

// errNotRESP2 is the error for a byte that cannot start a RESP2 reply: the
// Fleet speaks RESP2 (Protocol 2), so anything else is not Redis.
var errNotRESP2 = errors.New("fleet: Redis reply is not RESP2")

// limitDialer wraps dial so that every connection is read through a
// replyLimiter.
func limitDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if sc, ok := c.(syscall.Conn); ok {
			// A plain TCP connection: go-redis's pool checks the socket of an
			// idle connection before reusing it (a peek, which reads
			// nothing), and drops one Redis closed, instead of failing the
			// next round on it. It does not for TLS connections.
			return &rawReplyLimiter{replyLimiter{Conn: c}, sc}, nil
		}
		return &replyLimiter{Conn: c}, nil
	}
}

// rawReplyLimiter is a replyLimiter whose connection is a syscall.Conn.
type rawReplyLimiter struct {
	replyLimiter
	sc syscall.Conn
}

// SyscallConn returns the connection's raw connection.
func (c *rawReplyLimiter) SyscallConn() (syscall.RawConn, error) { return c.sc.SyscallConn() }

// replyLimiter is a connection to Redis (after TLS, if any) whose reads are
// checked as RESP2: each reply's declared lengths count against a budget of
// maxReplyBytes that every write (a new request) refills, and a line may
// not exceed maxReplyLine. The first violation fails every later read. go-redis
// uses one connection from one goroutine at a time; the budget is atomic
// so that a write racing a read stays well defined.
type replyLimiter struct {
	net.Conn
	budget atomic.Int64
	err    error // sticky

	// The scanner's state, between reads.
	state   int   // scanType, scanLine, scanLen or scanBulk
	kind    byte  // the type byte of the header being read
	line    int   // bytes of the current line so far
	n       int64 // the length being parsed
	neg     bool  // it had a minus sign
	digits  int   // its digits so far
	payload int64 // bulk bytes (and their CRLF) still to skip
}

const (
	scanType = iota // the next byte starts a reply
	scanLine        // inside a +, - or : line
	scanLen         // inside the length of a $ or * header
	scanBulk        // inside a bulk string's bytes
)

// Write sends a request and refills the budget of its replies.
func (c *replyLimiter) Write(p []byte) (int, error) {
	c.budget.Store(maxReplyBytes)
	return c.Conn.Write(p)
}

// Read reads from Redis and checks what it read; past a limit it returns
// the error, and no byte of the read, now and on every later call.
func (c *replyLimiter) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		if serr := c.scan(p[:n]); serr != nil {
			c.err = serr
			_ = c.Conn.Close()
			return 0, serr
		}
	}
	return n, err
}

// scan advances the scanner over b.
func (c *replyLimiter) scan(b []byte) error {
	for i := 0; i < len(b); {
		switch c.state {
		case scanBulk:
			skip := min(int64(len(b)-i), c.payload)
			c.payload -= skip
			i += int(skip)
			if c.payload == 0 {
				c.state = scanType
			}
			continue
		case scanType:
			c.kind, c.line = b[i], 0
			switch c.kind {
			case '+', '-', ':':
				c.state = scanLine
			case '$', '*':
				c.state, c.n, c.neg, c.digits = scanLen, 0, false, 0
			default:
				return fmt.Errorf("%w: a reply starts with %q", errNotRESP2, c.kind)
			}
		case scanLine:
			if b[i] == '\n' {
				c.state = scanType
			} else if c.line++; c.line > maxReplyLine {
				return fmt.Errorf("%w: a line of more than %d bytes", ErrReplyTooLarge, maxReplyLine)
			}
		case scanLen:
			if err := c.lenByte(b[i]); err != nil {
				return err
			}
		}
		i++
	}
	return nil
}

// lenByte reads one byte of a $ or * header's length, and at its end
// charges the budget.
func (c *replyLimiter) lenByte(x byte) error {
	switch {
	case x == '-' && c.digits == 0 && !c.neg:
		c.neg = true
		return nil
	case '0' <= x && x <= '9':
		if c.digits++; c.digits > 18 {
			return fmt.Errorf("%w: a length of more than 18 digits", ErrReplyTooLarge)
		}
		c.n = c.n*10 + int64(x-'0')
		return nil
	case x == '\r' && c.digits > 0:
		return nil
	case x != '\n' || c.digits == 0:
		return fmt.Errorf("%w: %q in a length", errNotRESP2, x)
	}
	c.state = scanType
	switch {
	case c.neg && c.n == 1: // a null bulk string or array
		return nil
	case c.neg:
		return fmt.Errorf("%w: a length of -%d", errNotRESP2, c.n)
	}
	cost := c.n + 2 // a bulk string and its CRLF
	if c.kind == '*' {
		cost = min(c.n, maxReplyBytes) * replyElemCost
	}
	if c.budget.Add(-cost) < 0 {
		return fmt.Errorf("%w: the replies to one request declare more than %d bytes", ErrReplyTooLarge, maxReplyBytes)
	}
	if c.kind == '$' {
		c.state, c.payload = scanBulk, c.n+2
	}
	return nil
}
