package tpsroute

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tpsroute/tpsroute/route"
)

// requestInfo is what the router reads from a serialised chat-completion body.
type requestInfo struct {
	RawModel  string // "model" as sent, possibly "model@revision"
	Model     string // the logical model, without any "@revision"
	Revision  string // the revision pinned with "model@revision", or ""
	Stream    bool   // the caller asked for a stream
	CacheKey  string // prompt_cache_key, or ""
	MaxTokens int64  // max_completion_tokens or max_tokens; 0 if absent
}

// readRequest reads the fields routing needs from body without decoding it.
func readRequest(body []byte) (requestInfo, error) {
	if !gjson.ValidBytes(body) {
		return requestInfo{}, fmt.Errorf("tpsroute: request body is not valid JSON")
	}
	r := gjson.GetManyBytes(body, "model", "stream", "prompt_cache_key", "max_completion_tokens", "max_tokens")
	if r[0].Type != gjson.String || r[0].Str == "" {
		return requestInfo{}, fmt.Errorf("tpsroute: request body has no \"model\" string")
	}
	name, rev := route.ParseModel(r[0].Str)
	max := r[3].Int()
	if max <= 0 {
		max = r[4].Int()
	}
	return requestInfo{
		RawModel:  r[0].Str,
		Model:     name,
		Revision:  rev,
		Stream:    r[1].Bool(),
		CacheKey:  r[2].Str,
		MaxTokens: max,
	}, nil
}

// rewriteBody returns the body to send to deployment d: its model id, the
// stream flag, include_usage where d supports it, and cache-control hints only
// where d declares support. The input is never modified, so a plan's attempts
// can each rewrite the same original.
//
// requested is the logical model the caller asked for; a wildcard deployment
// ("*") sends it unchanged.
func rewriteBody(body []byte, d route.Deployment, requested string, stream bool) ([]byte, error) {
	wire := d.ForModel(requested).WireModel()
	// sjson.SetBytes allocates a new slice, so body itself is never modified.
	out, err := sjson.SetBytes(body, "model", wire)
	if err != nil {
		return nil, fmt.Errorf("tpsroute: rewrite model: %w", err)
	}
	if stream {
		if !gjson.GetBytes(out, "stream").Bool() {
			if out, err = sjson.SetBytes(out, "stream", true); err != nil {
				return nil, fmt.Errorf("tpsroute: rewrite stream: %w", err)
			}
		}
		if d.Capabilities.IncludeUsage && !gjson.GetBytes(out, "stream_options.include_usage").Bool() {
			if out, err = sjson.SetBytes(out, "stream_options.include_usage", true); err != nil {
				return nil, fmt.Errorf("tpsroute: rewrite include_usage: %w", err)
			}
		}
	}
	if !d.Capabilities.CacheControl {
		if out, err = stripCacheHints(out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

var cacheControlKey = []byte(`"cache_control"`)

// stripCacheHints removes prompt_cache_key and every cache_control field on
// messages, message content parts and tools.
func stripCacheHints(body []byte) ([]byte, error) {
	var err error
	if gjson.GetBytes(body, "prompt_cache_key").Exists() {
		if body, err = sjson.DeleteBytes(body, "prompt_cache_key"); err != nil {
			return nil, fmt.Errorf("tpsroute: strip prompt_cache_key: %w", err)
		}
	}
	if !bytes.Contains(body, cacheControlKey) {
		return body, nil
	}
	var paths []string
	for _, list := range []string{"messages", "tools"} {
		gjson.GetBytes(body, list).ForEach(func(i, item gjson.Result) bool {
			base := list + "." + strconv.FormatInt(i.Int(), 10)
			if item.Get("cache_control").Exists() {
				paths = append(paths, base+".cache_control")
			}
			content := item.Get("content")
			if content.IsArray() {
				content.ForEach(func(j, part gjson.Result) bool {
					if part.Get("cache_control").Exists() {
						paths = append(paths, base+".content."+strconv.FormatInt(j.Int(), 10)+".cache_control")
					}
					return true
				})
			}
			return true
		})
	}
	for _, p := range paths {
		if body, err = sjson.DeleteBytes(body, p); err != nil {
			return nil, fmt.Errorf("tpsroute: strip %s: %w", p, err)
		}
	}
	return body, nil
}

// setCacheKey sets prompt_cache_key.
func setCacheKey(body []byte, key string) ([]byte, error) {
	b, err := sjson.SetBytes(body, "prompt_cache_key", key)
	if err != nil {
		return nil, fmt.Errorf("tpsroute: set prompt_cache_key: %w", err)
	}
	return b, nil
}
