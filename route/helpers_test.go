package route

import (
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/tpsroute/tpsroute/measure"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func dep(provider, region, model string) Deployment {
	return Deployment{Provider: provider, Region: region, Model: model, BaseURL: "http://127.0.0.1:9/v1"}
}

func key(provider, region, model string) measure.Key {
	return measure.Key{Provider: provider, Region: region, Model: model}
}

func equal(t testing.TB, got, want any, what string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func containsAll(t testing.TB, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%q does not contain %q", s, sub)
		}
	}
}
