// Package config reads the JSON configuration format shared by the library,
// examples/gateway and cmd/tpsbench (docs/CONFIG.md describes its schema) into
// a tpsroute.Config, and the fleet section into tpsroute.FleetSettings.
//
// Each deployment's "api_key_env" names an environment variable that Parse
// reads with os.LookupEnv; this is the only place the library reads the
// environment, and only for names the file gives. ParseLookup supplies the
// values another way. A literal "api_key" is refused, as are unknown fields;
// errors are *tpsroute.ConfigError values that name the field and its line.
package config
