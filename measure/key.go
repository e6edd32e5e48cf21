package measure

// Key names one deployment for statistics: a provider, a region and the model
// the provider serves. It is comparable and used as a map key.
// Statistics are further split by tps.CacheState under each Key.
// A Key is an immutable value, safe for concurrent use. In JSON its fields are "provider", "region", "model" and, when not empty, "api".
type Key struct {
	Provider string `json:"provider"`
	Region   string `json:"region"`
	Model    string `json:"model"`
	// API is the HTTP API the statistics are of ("responses", "messages",
	// "embeddings", as route.API spells them); "" is Chat Completions, so
	// that a deployment's Responses speed is not taken for its Chat speed.
	API string `json:"api,omitempty"`
}

// MaxKeyBytes is the longest of a Key's strings, in bytes, that a state file
// holds (docs/STATE.md: a restore skips a key record with a longer one).
// Code that makes keys from a caller's names (a wildcard deployment's model)
// refuses longer names before measuring anything under them: the Client
// answers such a request with a 400.
const MaxKeyBytes = 4096

// String returns "provider/region/model", with empty parts kept, and
// "#api" appended when API is not empty.
func (k Key) String() string {
	s := k.Provider + "/" + k.Region + "/" + k.Model
	if k.API != "" {
		s += "#" + k.API
	}
	return s
}
