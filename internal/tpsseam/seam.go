package tpsseam

// WithObserver is a func(fn func(now time.Time, c *payload.Chunk))
// tps.Option: an option that makes a Tap or Stream call fn synchronously
// for every data event, after the measurement has recorded it: decoded
// chunks, in-stream errors, malformed events (c.Malformed) and, for a Tap,
// the "[DONE]" sentinel (c.Done). now is the time the event was read. c and
// its byte slices are valid only until fn returns. fn runs on the reading
// goroutine and must not block; it must not call back into the Tap or
// Stream. A nil fn means no observer.
var WithObserver any
