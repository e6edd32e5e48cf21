package fallback

import (
	"bytes"
	"context"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tpsroute/tpsroute/route"
)

// DefaultBuild builds a POST to d.BaseURL+"/chat/completions" with body's
// "model" set to d.WireModel(), "stream_options.include_usage" set unless d
// declares Capabilities.NoStreamOptions, "Authorization: Bearer d.APIKey" (when
// not empty) and d.Headers. It reads nothing but d, so no credential or
// routing header of one deployment can reach another.
func DefaultBuild(ctx context.Context, d route.Deployment, body []byte) (*http.Request, error) {
	b, err := sjson.SetBytes(body, "model", d.WireModel())
	if err != nil {
		return nil, err
	}
	if !d.Capabilities.NoStreamOptions && !gjson.GetBytes(b, "stream_options.include_usage").Bool() {
		if b, err = sjson.SetBytes(b, "stream_options.include_usage", true); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(d.BaseURL, "/")+"/chat/completions", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if d.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+d.APIKey)
	}
	for k, v := range d.Headers {
		req.Header.Set(k, v)
	}
	return req, nil
}

// DefaultPrefill appends {"role":"assistant","content":text,"prefix":true} to
// the body's messages: the shape DeepSeek and Mistral accept for assistant
// prefill, and a final assistant message that vLLM, SGLang and Anthropic-style
// servers continue. A deployment that needs another shape (for example vLLM's
// "continue_final_message") gets it from Options.Prefill.
func DefaultPrefill(body []byte, text string) ([]byte, error) {
	msg := map[string]any{"role": "assistant", "content": text, "prefix": true}
	return sjson.SetBytes(body, "messages.-1", msg)
}

// streamBody returns body with "stream": true, copying only when needed.
func streamBody(body []byte) ([]byte, error) {
	if gjson.GetBytes(body, "stream").Type == gjson.True {
		return body, nil
	}
	return sjson.SetBytes(body, "stream", true)
}

// scrub replaces d's credentials in every field of pe, so that neither the
// error's message nor the *openai.Error built from it (Message, RawJSON)
// repeats a key the provider echoed.
func (pe *providerError) scrub(d *route.Deployment) {
	sc := route.NewScrubber(*d)
	pe.Code, pe.Type = sc.Scrub(pe.Code), sc.Scrub(pe.Type)
	pe.Message, pe.Param, pe.Raw = sc.Scrub(pe.Message), sc.Scrub(pe.Param), sc.Scrub(pe.Raw)
}
