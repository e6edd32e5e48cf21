package tpsroute

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tpsroute/tpsroute/internal/jsoncheck"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// requestInfo is what the router reads from a serialised chat-completion body.
type requestInfo struct {
	RawModel  string    // "model" as sent, possibly "model@revision"
	Model     string    // the logical model, without any "@revision"
	Revision  string    // the revision pinned with "model@revision", or ""
	Stream    bool      // the caller asked for a stream
	CacheKey  string    // prompt_cache_key, or ""
	MaxTokens int64     // max_completion_tokens or max_tokens; 0 if absent
	API       route.API // the call's API; "" is chat (readAPIRequest sets the others)
	// InputTokens is an embeddings call's expected input tokens, from its
	// "input" (embeddingsTokens); 0 for other calls, whose size is
	// estimated from the body's length.
	InputTokens int64
	// PrevID and ConvID are a Responses call's previous_response_id and
	// conversation id, which bind it to the deployment holding that state;
	// NoStore is its "store": false.
	PrevID, ConvID string
	NoStore        bool
}

// readRequest reads the fields routing needs from body without decoding it,
// and checks their types: a *RequestError names the first bad field. body is
// checked by jsoncheck.Valid (iterative, at most jsoncheck.MaxDepth levels)
// before gjson, which recurses once per level, reads it. The strings it
// returns are copies: a model name or cache key kept after the call (as a
// statistics key, say) never keeps the body alive.
func readRequest(body []byte) (requestInfo, error) {
	js, info, err := openRequest(body)
	if err != nil {
		return requestInfo{}, err
	}
	r := func(path string) gjson.Result { return gjson.Get(js, path) }
	if m := r("messages"); !m.IsArray() {
		return requestInfo{}, &RequestError{Param: "messages", Reason: "required: an array of messages"}
	}
	switch s := r("stream"); s.Type {
	case gjson.True:
		info.Stream = true
	case gjson.False, gjson.Null:
	default:
		return requestInfo{}, &RequestError{Param: "stream", Reason: "must be a boolean"}
	}
	// DefaultBuild sets stream_options.include_usage: a stream_options that
	// is not an object could not carry it (an array fails to build; a string
	// would be replaced), so it is the caller's error here, before routing,
	// rather than a failed attempt on a deployment.
	if o := r("stream_options"); o.Type != gjson.Null && !o.IsObject() {
		return requestInfo{}, &RequestError{Param: "stream_options", Reason: "must be an object"}
	} else if u := o.Get("include_usage"); u.Type != gjson.Null && u.Type != gjson.True && u.Type != gjson.False {
		return requestInfo{}, &RequestError{Param: "stream_options.include_usage", Reason: "must be a boolean"}
	}
	switch k := r("prompt_cache_key"); k.Type {
	case gjson.Null:
	case gjson.String:
		info.CacheKey = strings.Clone(k.Str)
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

// checkModelName refuses a model name longer than a statistics key may be
// (measure.MaxKeyBytes): a wildcard deployment would measure it under that
// name, and the state file would refuse it at the next start. param names
// the field ("model", "models").
func checkModelName(param, name string) error {
	if len(name) > measure.MaxKeyBytes {
		return &RequestError{Param: param, Reason: "a model name is at most " + strconv.Itoa(measure.MaxKeyBytes) + " bytes, not " + strconv.Itoa(len(name))}
	}
	return nil
}

// skipSpace returns the offset of the first byte of b that is not JSON white
// space (len(b) if none).
func skipSpace(b []byte) int {
	return len(b) - len(bytes.TrimLeft(b, " \t\r\n"))
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
// messages, message content parts, tools and (Anthropic's Messages API)
// system blocks.
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
	for _, list := range []string{"messages", "tools", "system"} {
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

// openRequest is the start every API's request reader shares: body must be
// valid JSON within jsoncheck.MaxDepth levels (checked iteratively before
// gjson, which recurses once per level, reads it) and an object with a
// "model" name, which info holds, cloned and parsed. js is body as a
// string, for gjson to read in place without the copy ParseBytes would
// make; what is kept must be cloned.
func openRequest(body []byte) (js string, info requestInfo, err error) {
	if err := jsoncheck.Valid(body); err != nil {
		if errors.Is(err, jsoncheck.ErrTooDeep) {
			return "", requestInfo{}, &RequestError{Reason: "request body nests arrays and objects deeper than " + strconv.Itoa(jsoncheck.MaxDepth) + " levels"}
		}
		return "", requestInfo{}, &RequestError{Reason: "request body is not valid JSON: " + strings.TrimPrefix(err.Error(), "jsoncheck: ")}
	}
	if body[skipSpace(body)] != '{' {
		return "", requestInfo{}, &RequestError{Reason: "request body must be a JSON object"}
	}
	js = unsafe.String(unsafe.SliceData(body), len(body))
	model := gjson.Get(js, "model")
	if model.Type != gjson.String || model.Str == "" {
		return "", requestInfo{}, &RequestError{Param: "model", Reason: "required: a model name string"}
	}
	if err := checkModelName("model", model.Str); err != nil {
		return "", requestInfo{}, err
	}
	info = requestInfo{RawModel: strings.Clone(model.Str)}
	info.Model, info.Revision = route.ParseModel(info.RawModel)
	return js, info, nil
}
