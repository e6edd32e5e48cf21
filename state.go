package tpsroute

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// defaultStateInterval is how often a Client with a Config.StateFile writes
// it when Config.StateInterval is zero: once a minute, so a crash loses at
// most a minute of measurements (a graceful stop loses none: Close writes
// it), while a file of a few megabytes for hundreds of busy deployments is
// written rarely enough to cost nothing measurable.
const defaultStateInterval = time.Minute

// stateSaver writes a Client's statistics to its state file, periodically
// from one goroutine and once more at Close. It is safe for concurrent use.
type stateSaver struct {
	path   string
	reg    *registry.Registry
	logger *slog.Logger

	mu sync.Mutex // serialises writes

	once sync.Once
	stop chan struct{} // closed by Close
	done chan struct{} // closed when the loop returned; nil without a loop
}

// restoreState fills reg from the state file at path, keeping the keys a
// configured deployment serves. A missing file is a cold start. A file that
// is not a state file, or cannot be read, is an error, so that a wrong path
// is never overwritten. A state file of another version, for other window
// options, or corrupt, is logged and the Client starts cold; the next save
// replaces it. A damaged key record is logged by name, and the others are
// restored.
func restoreState(path string, reg *registry.Registry, deps []route.Deployment, logger *slog.Logger, now time.Time) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		logger.Info("tpsroute: no state file yet; starting cold", "path", path)
		return nil
	}
	if err != nil {
		return fmt.Errorf("tpsroute: state file: %w", err)
	}
	defer f.Close()
	info, err := reg.RestoreState(f, now, keepConfigured(deps))
	switch {
	case err == nil:
		logger.Info("tpsroute: statistics restored", "path", path, "saved", info.SavedAt,
			"keys", info.Keys, "expired", info.Expired, "not_configured", info.Skipped, "damaged", info.Bad)
		for _, ke := range info.BadKeys {
			logger.Warn("tpsroute: state file key damaged; not restored, the others are", "path", path, "key", ke.Key.String(), "err", ke.Err)
		}
		if n := info.Bad - len(info.BadKeys); n > 0 {
			logger.Warn("tpsroute: more state file keys damaged; not restored", "path", path, "more", n)
		}
		return nil
	case errors.Is(err, measure.ErrStateFormat):
		return fmt.Errorf("tpsroute: state file %s: %w; refusing to overwrite it", path, err)
	case errors.Is(err, registry.ErrStateVersion), errors.Is(err, registry.ErrStateCorrupt), errors.Is(err, registry.ErrIncompatible):
		logger.Warn("tpsroute: state file not restored; starting cold, it is replaced at the next save", "path", path, "err", err)
		return nil
	default:
		return fmt.Errorf("tpsroute: state file %s: %w", path, err)
	}
}

// keepConfigured reports whether a deployment of deps serves key k: a
// deployment's own key, or for a wildcard deployment its provider and region
// with a model it admits (and its revision).
func keepConfigured(deps []route.Deployment) func(measure.Key) bool {
	keys := make(map[measure.Key]bool, len(deps))
	var wild []route.Deployment
	for _, d := range deps {
		if d.IsWildcard() {
			wild = append(wild, d)
		} else {
			keys[d.Key()] = true
		}
	}
	return func(k measure.Key) bool {
		if keys[k] {
			return true
		}
		for _, d := range wild {
			if d.Provider != k.Provider || d.Region != k.Region {
				continue
			}
			m := k.Model
			if d.Revision != "" {
				var ok bool
				if m, ok = strings.CutSuffix(m, "@"+d.Revision); !ok {
					continue
				}
			}
			if m != "" && (d.Models == nil || slices.Contains(d.Models, m)) && d.ForModel(m).Key() == k {
				return true
			}
		}
		return false
	}
}

// start runs the periodic save every interval (none when interval < 0).
func (s *stateSaver) start(interval time.Duration) {
	s.stop = make(chan struct{})
	if interval < 0 {
		return
	}
	if interval == 0 {
		interval = defaultStateInterval
	}
	s.done = make(chan struct{})
	go s.loop(interval)
}

func (s *stateSaver) loop(interval time.Duration) {
	defer close(s.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if err := s.save(time.Now()); err != nil {
				s.logger.Warn("tpsroute: state file not written", "path", s.path, "err", err)
			}
		}
	}
}

// close stops the loop, waits for it, and writes the file one last time.
// Only the first call writes; later ones return nil.
func (s *stateSaver) close() error {
	var err error
	s.once.Do(func() {
		close(s.stop)
		if s.done != nil {
			<-s.done
		}
		err = s.save(time.Now())
	})
	return err
}

// save writes the statistics at now to the state file atomically: into a
// temporary file in the same directory, synced, then renamed over the file,
// and the directory synced, so that a crash leaves the old file or the new
// one, never a part of either. A file at the path that is not a state file
// is never replaced: save returns an error wrapping measure.ErrStateFormat.
func (s *stateSaver) save(now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := replaceable(s.path); err != nil {
		return fmt.Errorf("tpsroute: state file %s: %w; refusing to overwrite it", s.path, err)
	}
	var buf bytes.Buffer
	if err := s.reg.SaveState(&buf, now); err != nil {
		return err
	}
	if err := writeFileAtomic(s.path, buf.Bytes()); err != nil {
		return fmt.Errorf("tpsroute: state file: %w", err)
	}
	return nil
}

// replaceable returns nil when path names no file or a state file (of any
// version), which a save may replace, and an error otherwise: one wrapping
// measure.ErrStateFormat for a file that is not a state file, after reading
// at most its first 5 bytes.
func replaceable(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	return registry.CheckStateFile(f)
}

// writeFileAtomic replaces the file at path with data (mode 0600) by a
// rename within its directory.
func writeFileAtomic(path string, data []byte) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		// Make the rename durable; some file systems cannot sync a
		// directory, which leaves the rename to the next flush.
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// Close stops the periodic writing of Config.StateFile and writes it one
// last time, returning that write's error; the gateway calls it after
// draining. Without a StateFile it writes nothing. When Config.HTTPClient
// set no transport, Close also closes the idle connections of the one New
// built (Config.HTTPClient's own are the caller's to close). Close is
// idempotent (later calls return nil) and safe for concurrent use. The
// Client stays usable after Close: calls still route and are measured (on
// new connections), but the state file is no longer written.
func (c *Client) Close() error {
	if c.own != nil {
		c.own.CloseIdleConnections()
	}
	if c.state == nil {
		return nil
	}
	return c.state.close()
}
