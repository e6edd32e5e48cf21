package tpsroute

import (
	"bytes"
	"fmt"
	"math"
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

// readRequest reads the fields routing needs from body without decoding it,
// and checks their types: a *RequestError names the first bad field.
func readRequest(body []byte) (requestInfo, error) {
	if !gjson.ValidBytes(body) {
		return requestInfo{}, &RequestError{Reason: "request body is not valid JSON"}
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return requestInfo{}, &RequestError{Reason: "request body must be a JSON object"}
	}
	r := root.Get
	model := r("model")
	if model.Type != gjson.String || model.Str == "" {
		return requestInfo{}, &RequestError{Param: "model", Reason: "required: a model name string"}
	}
	if m := r("messages"); !m.IsArray() {
		return requestInfo{}, &RequestError{Param: "messages", Reason: "required: an array of messages"}
	}
	info := requestInfo{RawModel: model.Str}
	info.Model, info.Revision = route.ParseModel(model.Str)
	switch s := r("stream"); s.Type {
	case gjson.True:
		info.Stream = true
	case gjson.False, gjson.Null:
	default:
		return requestInfo{}, &RequestError{Param: "stream", Reason: "must be a boolean"}
	}
	switch k := r("prompt_cache_key"); k.Type {
	case gjson.Null:
	case gjson.String:
		info.CacheKey = k.Str
	default:
		return requestInfo{}, &RequestError{Param: "prompt_cache_key", Reason: "must be a string"}
	}
	for _, name := range []string{"max_completion_tokens", "max_tokens"} {
		v := r(name)
		if v.Type == gjson.Null {
			continue
		}
		if v.Type != gjson.Number || v.Num < 1 || v.Num != math.Trunc(v.Num) {
			return requestInfo{}, &RequestError{Param: name, Reason: "must be a positive integer"}
		}
		if info.MaxTokens == 0 {
			info.MaxTokens = int64(v.Num)
		}
	}
	return info, nil
}

// attemptBody returns body as one deployment may see it: with the cache hints
// (prompt_cache_key, cache_control) stripped unless d declares
// Capabilities.CacheControl. body itself is never modified, so a plan's
// attempts can each start from the same original.
func attemptBody(body []byte, d route.Deployment) ([]byte, error) {
	if d.Capabilities.CacheControl {
		return body, nil
	}
	return stripCacheHints(body)
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
