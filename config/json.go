package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/internal/jsoncheck"
)

// refusedKeys are object keys that are never accepted, with the reason.
var refusedKeys = map[string]string{
	"api_key": "literal API keys are refused in config files; put the key in an environment variable and name it with \"api_key_env\"",
}

// checkKeys walks the JSON document in data against the shape of t (the
// schema struct) and reports the first key that t does not declare, with its
// path and line. Keys match json tags exactly (encoding/json would also accept
// other cases; a config file should not). It reports syntax errors with their line.
//
// It returns the line of every value by path ("deployments[0].price"), so that
// later validation errors can name their line too.
//
// Nesting deeper than jsoncheck.MaxDepth (128 levels) is refused first, by
// jsoncheck's one pass: the walker recurses once per level and builds a path
// per level, so that megabytes of brackets would cost it minutes.
func checkKeys(data []byte, t reflect.Type) (map[string]int, error) {
	var je *jsoncheck.Error
	if err := jsoncheck.Valid(data); errors.Is(err, jsoncheck.ErrTooDeep) && errors.As(err, &je) {
		return nil, &tpsroute.ConfigError{Line: lineAt(data, int64(je.Offset)), Msg: "arrays and objects nested deeper than " + strconv.Itoa(jsoncheck.MaxDepth) + " levels"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := keyWalker{dec: dec, data: data, lines: make(map[string]int), newlines: newlines(data)}
	if err := w.value(t, ""); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &tpsroute.ConfigError{Line: lineAt(data, dec.InputOffset()), Msg: "unexpected data after the top-level value"}
	}
	return w.lines, nil
}

type keyWalker struct {
	dec      *json.Decoder
	data     []byte
	lines    map[string]int // path -> line of the key (or of the value for array items)
	newlines []int64        // the offset of every '\n' in data, in order
}

// newlines returns the offset of every '\n' in data.
func newlines(data []byte) []int64 {
	var out []int64
	for i, b := 0, data; ; {
		j := bytes.IndexByte(b, '\n')
		if j < 0 {
			return out
		}
		out = append(out, int64(i+j))
		i, b = i+j+1, b[j+1:]
	}
}

// line is lineAt(w.data, offset), found by a binary search of w.newlines
// instead of a count from the start: the walker asks once per value.
func (w *keyWalker) line(offset int64) int {
	offset = min(max(offset, 0), int64(len(w.data)))
	n, _ := slices.BinarySearch(w.newlines, offset)
	return n + 1
}

func (w *keyWalker) syntax(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &tpsroute.ConfigError{Line: lineAt(w.data, se.Offset), Msg: se.Error()}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &tpsroute.ConfigError{Line: lineAt(w.data, int64(len(w.data))), Msg: "unexpected end of JSON"}
	}
	return &tpsroute.ConfigError{Line: lineAt(w.data, w.dec.InputOffset()), Msg: err.Error()}
}

// value consumes one JSON value that should have Go type t.
// Its complexity (about 21) is one case per JSON token kind and Go kind
// (object into struct or map, array into slice, scalars); the cases share
// the walker's position bookkeeping, so they stay together.
func (w *keyWalker) value(t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if _, seen := w.lines[path]; !seen {
		w.lines[path] = w.line(keyOffset(w.data, w.dec.InputOffset()))
	}
	tok, err := w.dec.Token()
	if err != nil {
		return w.syntax(err)
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar; its type is checked by encoding/json later
	}
	switch d {
	case '{':
		var fields map[string]reflect.Type
		if t.Kind() == reflect.Struct {
			fields = jsonFields(t)
		}
		for w.dec.More() {
			start := w.dec.InputOffset()
			ktok, err := w.dec.Token()
			if err != nil {
				return w.syntax(err)
			}
			key, _ := ktok.(string)
			sub := key
			if path != "" {
				sub = path + "." + key
			}
			line := w.line(keyOffset(w.data, start))
			w.lines[sub] = line
			var ft reflect.Type
			switch {
			case fields != nil:
				if why, bad := refusedKeys[key]; bad {
					return &tpsroute.ConfigError{Line: line, Field: sub, Msg: why}
				}
				if ft, ok = fields[key]; !ok {
					return &tpsroute.ConfigError{Line: line, Field: sub, Msg: fmt.Sprintf("unknown field %q", key)}
				}
			case t.Kind() == reflect.Map:
				ft = t.Elem()
			default:
				ft = anyType
			}
			if err := w.value(ft, sub); err != nil {
				return err
			}
		}
	case '[':
		et := anyType
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			et = t.Elem()
		}
		for i := 0; w.dec.More(); i++ {
			if err := w.value(et, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	}
	if _, err := w.dec.Token(); err != nil { // the closing delimiter
		return w.syntax(err)
	}
	return nil
}

var anyType = reflect.TypeFor[any]()

// jsonFields maps the json names of t's exported fields to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	m := make(map[string]reflect.Type, t.NumField())
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		m[cmp.Or(name, f.Name)] = f.Type
	}
	return m
}

// keyOffset skips the separator and blanks after offset, so that a key's
// reported line is the line the key is on.
func keyOffset(data []byte, offset int64) int64 {
	for offset < int64(len(data)) {
		switch data[offset] {
		case ' ', '\t', '\r', '\n', ',', ':':
			offset++
		default:
			return offset
		}
	}
	return offset
}

// lineAt returns the 1-based line of byte offset in data.
func lineAt(data []byte, offset int64) int {
	offset = min(max(offset, 0), int64(len(data)))
	return bytes.Count(data[:offset], []byte{'\n'}) + 1
}

// decode decodes data, which checkKeys accepted (so its syntax and keys
// are known good), into v, turning a type error into a ConfigError with the
// field path and line.
func decode(data []byte, v any) error {
	err := json.Unmarshal(data, v)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &tpsroute.ConfigError{Line: lineAt(data, te.Offset), Field: te.Field, Msg: fmt.Sprintf("want %s, got JSON %s", te.Type, te.Value)}
	}
	if err != nil {
		return &tpsroute.ConfigError{Msg: err.Error()}
	}
	return nil
}
