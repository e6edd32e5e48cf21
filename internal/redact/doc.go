// Package redact applies route's credential policy (route.IsCredentialName,
// route.Redacted) to what the library hands back, records or logs: a header
// set (Header), a request (Request), a deployment (Deployment), and bytes
// that may echo a key in any form a JSON or HTTP reader would decode back
// into it (Scrubber, made from deployments by NewScrubber or from the
// request that carries them by RequestScrubber).
//
// It is the one home of that machinery: the root's Client (errors,
// deployments handed back, logs), internal/executor (every provider error,
// header and event relayed to a caller) and replay's recorder and attempt
// log call it. It is internal because callers never redact: what the
// library hands them already is. The rule itself, which names are
// credentials, stays in route, where the config file and Deployment.Validate
// read it and docs/SECURITY.md documents it.
//
// Functions are pure; a Scrubber is safe for concurrent use.
package redact
