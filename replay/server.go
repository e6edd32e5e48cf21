package replay

import (
	"io"
	"log"
	"net"
	"net/http"
	"sync"
)

// Server is a fake OpenAI-compatible provider listening on 127.0.0.1, in the
// style of httptest.Server: it serves a Handler over real TCP. A Server is
// safe for concurrent use.
type Server struct {
	h    *Handler
	srv  *http.Server
	url  string
	done chan struct{}
	once sync.Once
}

// NewServer starts a Server on 127.0.0.1:0 serving scripts by model name
// (see NewHandler). It panics if it cannot listen, as httptest.NewServer does.
// Call Close when done.
func NewServer(scripts map[string]Script, opts ...Option) *Server {
	h := NewHandler(scripts, opts...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic("replay: listen on 127.0.0.1:0: " + err.Error())
	}
	s := &Server{
		h: h,
		srv: &http.Server{
			Handler:  h,
			ErrorLog: log.New(io.Discard, "", 0),
		},
		url:  "http://" + ln.Addr().String() + "/v1",
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed once Close is called
	}()
	return s
}

// URL returns the base URL including /v1, e.g. "http://127.0.0.1:4321/v1",
// suitable for openai-go's option.WithBaseURL.
func (s *Server) URL() string { return s.url }

// Handler returns the Handler the Server serves.
func (s *Server) Handler() *Handler { return s.h }

// Attempts returns the handler's attempt log (see Handler.Attempts).
func (s *Server) Attempts() []Attempt { return s.h.Attempts() }

// Close stops the server: in-flight streams end at once with an aborted
// connection (clients see an error, never a clean end), and Close returns
// after every handler has returned. Close is idempotent.
func (s *Server) Close() {
	s.once.Do(func() {
		s.h.shutdown()
		_ = s.srv.Close()
		<-s.done
		s.h.wg.Wait()
	})
}
