package jsoncheck_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tpsroute/tpsroute/internal/jsoncheck"
)

// Valid accepts one JSON value, reports where a text stops being valid, and
// refuses nesting deeper than MaxDepth with an error that matches
// ErrTooDeep, so that a caller can answer that case on its own.
func ExampleValid() {
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	fmt.Println(jsoncheck.Valid([]byte(body)))
	fmt.Println(jsoncheck.Valid([]byte(`{"model":"gpt-4o-mini",}`)))

	deep := strings.Repeat("[", jsoncheck.MaxDepth+1) + strings.Repeat("]", jsoncheck.MaxDepth+1)
	err := jsoncheck.Valid([]byte(deep))
	var e *jsoncheck.Error
	fmt.Println(errors.Is(err, jsoncheck.ErrTooDeep), errors.As(err, &e) && e.Offset == jsoncheck.MaxDepth)
	fmt.Println(err)
	// Output:
	// <nil>
	// jsoncheck: want a string key at byte 23
	// true true
	// jsoncheck: nested deeper than 128 levels at byte 128
}
