package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// AddrEnv names the environment variable holding the address of the
// redis-server that .ci/run starts.
const AddrEnv = "TPSROUTE_REDIS_ADDR"

// CIEnv names the environment variable .ci/run sets: when it is not empty,
// a missing Redis fails the test instead of skipping it.
const CIEnv = "TPSROUTE_CI"

func missing(t testing.TB, what string) {
	t.Helper()
	msg := what + ": the Redis integration tests need a real redis-server. " +
		"Install it (apt-get install -y redis-server) and run: " +
		"redis-server --port 6390 --save '' --appendonly no & " + AddrEnv + "=127.0.0.1:6390 go test ./fleet/ ./examples/gateway/"
	if os.Getenv(CIEnv) != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Addr returns the address of the shared redis-server (AddrEnv).
func Addr(t testing.TB) string {
	t.Helper()
	a := os.Getenv(AddrEnv)
	if a == "" {
		missing(t, AddrEnv+" is not set")
	}
	return a
}

// Server is a redis-server process a test owns, without persistence.
type Server struct {
	t    testing.TB
	bin  string
	Addr string // 127.0.0.1:port, kept across Restart
	cmd  *exec.Cmd
}

// Start starts a redis-server on a free loopback port; it is stopped when the
// test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		missing(t, "redis-server is not on PATH")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := &Server{t: t, bin: bin, Addr: addr}
	s.start()
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	_, port, _ := net.SplitHostPort(s.Addr)
	s.cmd = exec.Command(s.bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no",
		"--dir", s.t.TempDir(), "--loglevel", "warning")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", s.Addr, time.Second); err == nil {
			fmt.Fprint(c, "PING\r\n")
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "+PONG") {
				return
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s did not answer within 10s", s.Addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop stops the server (idempotent).
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart starts the server again on the same address, empty.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}
