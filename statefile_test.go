package tpsroute

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/measure"
)

// TestStateFileNotOursIsNeitherReadNorOverwritten is issue 34's -state
// naming a 1.1 GB file that is not a state file: it was read whole at start
// (1 GiB of it, as the limit allowed), taken for a corrupt state file and
// overwritten at the first save. Now New refuses it after its first bytes
// and leaves it alone; and a file that appears at the path after New is not
// overwritten by the saves either.
func TestStateFileNotOursIsNeitherReadNorOverwritten(t *testing.T) {
	f, ds := stateFleet()
	t.Run("1.1 GB at start", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "state")
		require.NoError(t, os.WriteFile(file, []byte("not a state file\n"), 0o600))
		require.NoError(t, os.Truncate(file, 1100<<20)) // sparse: costs no disk
		var rec planRecorder
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := New(stateConfig(f, ds, file, &rec))
		runtime.ReadMemStats(&after)
		require.ErrorIs(t, err, measure.ErrStateFormat)
		assert.Contains(t, err.Error(), "refusing to overwrite")
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20), "New allocated %d bytes", after.TotalAlloc-before.TotalAlloc)
		fi, err := os.Stat(file)
		require.NoError(t, err)
		assert.Equal(t, int64(1100<<20), fi.Size(), "the file is left alone")
	})
	t.Run("put there after the start", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "state")
		var rec planRecorder
		cfg := stateConfig(f, ds, file, &rec)
		cfg.StateInterval = -1
		c := mustNew(t, cfg) // no file yet: a cold start
		_, _, err := streamOnce(t, c, "m")
		require.NoError(t, err)
		other := []byte(`{"deployments": []}`)
		require.NoError(t, os.WriteFile(file, other, 0o600))
		err = c.Close()
		require.ErrorIs(t, err, measure.ErrStateFormat)
		assert.Contains(t, err.Error(), "refusing to overwrite")
		got, rerr := os.ReadFile(file)
		require.NoError(t, rerr)
		assert.Equal(t, other, got, "the file is left alone")
	})
}

// TestStateFileDamagedKeyIsLogged: a state file whose checksum holds but one
// of whose key records is damaged restores the others, and New logs the
// damaged key at Warn by name; before, the whole file was refused and every
// deployment started cold.
func TestStateFileDamagedKeyIsLogged(t *testing.T) {
	f, ds := stateFleet()
	dir := t.TempDir()
	file := filepath.Join(dir, "state")
	var rec planRecorder
	c := mustNew(t, stateConfig(f, ds, file, &rec))
	for _, d := range ds {
		_, _, err := streamOnce(t, c, "m", WithPin(d.Provider, ""))
		require.NoError(t, err)
	}
	require.NoError(t, c.Close())
	good, err := os.ReadFile(file)
	require.NoError(t, err)
	// Keys are saved sorted: the last record is "slow"'s. Before its
	// terminating 0 (the byte before the checksum) goes a cache-state
	// section for state 7, which no key has.
	body := append(bytes.Clone(good[:len(good)-5]), 2, 1, 7, 0)
	bad := binary.LittleEndian.AppendUint32(body, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
	require.NoError(t, os.WriteFile(file, bad, 0o600))

	var logs bytes.Buffer
	cfg := stateConfig(f, ds, file, &rec)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.StateInterval = -1
	c = mustNew(t, cfg)
	assert.Equal(t, 2, c.Stats().Len(), "fast and mid are restored")
	_, ok := c.Stats().Lookup(ds[0].Key())
	assert.False(t, ok, "slow is not")
	assert.Contains(t, logs.String(), "level=WARN")
	assert.Contains(t, logs.String(), "key=slow//m")
	assert.Contains(t, logs.String(), "cache state 7")
	require.NoError(t, c.Close())
}
