package payload

import (
	"math/rand/v2"
	"testing"
)

// TestNextSpecial checks the word-at-a-time search against a byte loop, for
// every start offset of buffers mixing plain, special and high bytes.
func TestNextSpecial(t *testing.T) {
	naive := func(b []byte, i int) int {
		for i < len(b) && b[i] != '"' && b[i] != '\\' && b[i] >= 0x20 {
			i++
		}
		return i
	}
	alphabet := []byte{'a', ' ', '!', '#', '"', '\\', 0x00, 0x01, 0x1f, 0x20, 0x21, 0x5b, 0x5d, 0x7f, 0x80, 0xa2, 0xff}
	rng := rand.New(rand.NewPCG(1, 17))
	for range 2000 {
		b := make([]byte, rng.IntN(40))
		for j := range b {
			if rng.IntN(4) == 0 {
				b[j] = alphabet[rng.IntN(len(alphabet))]
			} else {
				b[j] = byte('a' + rng.IntN(26))
			}
		}
		for i := 0; i <= len(b); i++ {
			if got, want := nextSpecial(b, i), naive(b, i); got != want {
				t.Fatalf("nextSpecial(%q, %d) = %d, want %d", b, i, got, want)
			}
		}
	}
}
