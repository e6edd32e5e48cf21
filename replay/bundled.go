package replay

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed cassettes/*.json
var bundledFS embed.FS

// BundledNames returns the names of the cassettes embedded in the package,
// sorted: provider dialects authored from the shapes in
// docs/STREAM_QUIRKS.md (OpenAI with a usage chunk, Azure content-filter
// annotations, vLLM, llama.cpp timings, Groq usage twice, OpenRouter
// processing comments, DeepSeek reasoning with keep-alives and cache hits,
// Mistral multi-token chunks, a mid-stream error, TGI framing).
func BundledNames() []string {
	entries, _ := fs.ReadDir(bundledFS, "cassettes")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".json"))
	}
	sort.Strings(names)
	return names
}

// Bundled returns a freshly parsed copy of the embedded cassette name (one of
// BundledNames), with its original timing.
func Bundled(name string) (*Cassette, error) {
	b, err := bundledFS.ReadFile("cassettes/" + name + ".json")
	if err != nil {
		return nil, fmt.Errorf("replay: no bundled cassette %q (have %s)", name, strings.Join(BundledNames(), ", "))
	}
	return ParseCassette(bytes.NewReader(b), "bundled:"+name)
}
