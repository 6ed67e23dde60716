package main

import (
	"fmt"
	"strings"
)

// sbkitConfig is the "Sbkit" object of a configuration file: this emulator's own
// settings, for which Microsoft's emulator schema (Config-schema.json) has no key. It
// may stand in a file of its own (-config is repeatable), so that the file Microsoft's
// emulator reads stays within its schema.
//
//	"Sbkit": {
//	  "SharedAccessKeys": [{"KeyName": "RootManageSharedAccessKey", "Key": "..."}]
//	}
type sbkitConfig struct {
	// SharedAccessKeys are the keys that sign the shared access signatures the emulator
	// requires (-sas-key's name=key pairs; sbtest.ServerOptions.SASKeys).
	SharedAccessKeys []configSASKey
}

// configSASKey is one shared access key: its name, as a connection string's
// SharedAccessKeyName, and the key, as its SharedAccessKey.
type configSASKey struct {
	KeyName string
	Key     string
}

// maxSASKeys is the service's limit of shared access authorization rules per namespace
// ("Service Bus quotas": 12).
const maxSASKeys = 12

// addSASKeys adds a file's shared access keys to e.SASKeys. at gives the position of the
// i-th key in the file, followed by ": ", for errors. A name may be given once, in any
// file; neither a name nor a key may be empty or hold ';' (which ends a connection
// string's value) or surrounding spaces.
func (e *entities) addSASKeys(keys []configSASKey, at func(i int) string) error {
	for i, k := range keys {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: %sSbkit.SharedAccessKeys[%d]: %s", errConfig, at(i), i, fmt.Sprintf(format, args...))
		}
		for _, f := range []struct{ field, v string }{{"KeyName", k.KeyName}, {"Key", k.Key}} {
			switch {
			case f.v == "":
				return bad("%s is empty", f.field)
			case strings.TrimSpace(f.v) != f.v:
				return bad("%s %q has surrounding spaces", f.field, f.v)
			case strings.Contains(f.v, ";"):
				return bad("%s holds ';', which a connection string cannot carry", f.field)
			}
		}
		if _, ok := e.SASKeys[k.KeyName]; ok {
			return bad("KeyName %q is given twice", k.KeyName)
		}
		if len(e.SASKeys) == maxSASKeys {
			return bad("more than %d keys (the service's limit of shared access authorization rules per namespace)", maxSASKeys)
		}
		e.SASKeys[k.KeyName] = k.Key
	}
	return nil
}
