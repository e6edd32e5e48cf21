package measure

// Key names one deployment for statistics: a provider, a region and the model
// the provider serves. It is comparable and used as a map key.
// Statistics are further split by tps.CacheState under each Key.
type Key struct {
	Provider string
	Region   string
	Model    string
}

// String returns "provider/region/model", with empty parts kept.
func (k Key) String() string {
	return k.Provider + "/" + k.Region + "/" + k.Model
}
