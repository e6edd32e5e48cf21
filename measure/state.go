package measure

import "errors"

// ErrStateFormat means the bytes are not a tpsroute state file (no "TPSS"
// magic, docs/STATE.md). tpsroute.New returns an error wrapping it when
// Config.StateFile names a file that is not a state file, rather than
// overwrite that file; test with errors.Is.
var ErrStateFormat = errors.New("measure: not a state file")
