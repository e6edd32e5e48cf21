package payload

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestResetClears sets every field of a Chunk and holds Reset to clearing
// all but the scratch buffers and the memos, so that a field added to
// Chunk cannot outlive the payload it was read from.
func TestResetClears(t *testing.T) {
	var c Chunk
	v := reflect.ValueOf(&c).Elem()
	for i := range v.NumField() {
		setNonZero(reflect.NewAt(v.Field(i).Type(), v.Field(i).Addr().UnsafePointer()).Elem())
	}
	c.Reset()
	kept := map[string]bool{"env": true, "shape": true, "tmpl": true}
	for i := range v.NumField() {
		name, f := v.Type().Field(i).Name, v.Field(i)
		switch {
		case kept[name]:
			assert.False(t, f.IsZero(), "%s is kept", name)
		case name == "buf" || name == "Choices" || name == "ToolCalls":
			assert.Zero(t, f.Len(), "%s is emptied", name)
			assert.NotZero(t, f.Cap(), "%s keeps its storage", name)
		default:
			assert.True(t, f.IsZero(), "%s is cleared", name)
		}
	}
}

// setNonZero gives v, and every field of a struct v, a value other than
// the zero one.
func setNonZero(v reflect.Value) {
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint8, reflect.Uint32:
		v.SetUint(7)
	case reflect.Float64:
		v.SetFloat(7)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 4)
		setNonZero(s.Index(0))
		v.Set(s)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Field(i)
			setNonZero(reflect.NewAt(f.Type(), f.Addr().UnsafePointer()).Elem())
		}
	default:
		panic("setNonZero: " + v.Kind().String())
	}
}
