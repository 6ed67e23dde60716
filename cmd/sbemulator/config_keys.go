package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// keys are the keys an object of the configuration file may hold, each with what its
// value may hold (nil: anything, not checked). An array's elements are checked against
// the keys of the array.
type keys map[string]keys

// The keys of Microsoft's emulator configuration schema (Config-schema.json of
// Azure/azure-service-bus-emulator-installer), level by level: each kind of entity has
// its own Properties.
var (
	queueKeys = keys{"DeadLetteringOnMessageExpiration": nil, "DefaultMessageTimeToLive": nil,
		"DuplicateDetectionHistoryTimeWindow": nil, "ForwardDeadLetteredMessagesTo": nil, "ForwardTo": nil,
		"LockDuration": nil, "MaxDeliveryCount": nil, "RequiresDuplicateDetection": nil, "RequiresSession": nil}
	topicKeys        = keys{"DefaultMessageTimeToLive": nil, "DuplicateDetectionHistoryTimeWindow": nil, "RequiresDuplicateDetection": nil}
	subscriptionKeys = keys{"DeadLetteringOnMessageExpiration": nil, "DefaultMessageTimeToLive": nil, "LockDuration": nil,
		"MaxDeliveryCount": nil, "ForwardDeadLetteredMessagesTo": nil, "ForwardTo": nil, "RequiresSession": nil}
	ruleKeys = keys{"Name": nil, "Properties": {
		"FilterType": nil,
		"CorrelationFilter": {"ContentType": nil, "CorrelationId": nil, "Label": nil, "MessageId": nil, "ReplyTo": nil,
			"ReplyToSessionId": nil, "SessionId": nil, "To": nil, "Properties": nil},
		"SqlFilter": {"SqlExpression": nil},
		"Action":    {"SqlExpression": nil},
	}}
	configKeys = keys{
		"UserConfig": {
			"Namespaces": {
				"Name":   nil,
				"Queues": {"Name": nil, "Properties": queueKeys},
				"Topics": {"Name": nil, "Properties": topicKeys, "Subscriptions": {
					"Name": nil, "Properties": subscriptionKeys, "Rules": ruleKeys,
				}},
			},
			"Logging": {"Type": nil},
		},
		// sbkit's own (config_sas.go), not in Microsoft's schema.
		"Sbkit": {"SharedAccessKeys": {"KeyName": nil, "Key": nil}},
	}
)

// checkKeys refuses a key of the configuration file that the schema does not have,
// naming its path (UserConfig.Namespaces[0].Queues[1].Properties): a misspelt property
// would otherwise be ignored. Keys match case-insensitively, as encoding/json decodes
// them. It works on any JSON document, so it keeps working when comments are stripped
// first. The error is a *keyError, which has the key's JSON pointer.
func checkKeys(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("%w: %v", errConfig, err)
	}
	return walkKeys(v, configKeys, "", "")
}

// keyError is an unknown key of the configuration file.
type keyError struct {
	where   string // the path of the object that holds it
	key     string
	known   []string
	pointer string // the key's JSON pointer (RFC 6901)
	pos     string // its line and column, when known
}

func (e *keyError) Error() string {
	pos := ""
	if e.pos != "" {
		pos = e.pos + ": "
	}
	return fmt.Sprintf("%v: %s%s: unknown key %q (known: %s)", errConfig, pos, e.where, e.key, strings.Join(e.known, ", "))
}

func (e *keyError) Unwrap() error { return errConfig }

func walkKeys(v any, want keys, path, pointer string) error {
	if want == nil {
		return nil
	}
	switch v := v.(type) {
	case []any:
		for i, e := range v {
			if err := walkKeys(e, want, fmt.Sprintf("%s[%d]", path, i), fmt.Sprintf("%s/%d", pointer, i)); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			name, ok := knownKey(want, k)
			if !ok {
				where := path
				if where == "" {
					where = "the top level"
				}
				return &keyError{where: where, key: k, known: slices.Sorted(maps.Keys(want)), pointer: pointer + "/" + pointerToken(k)}
			}
			sub := name
			if path != "" {
				sub = path + "." + name
			}
			if err := walkKeys(v[k], want[name], sub, pointer+"/"+pointerToken(k)); err != nil {
				return err
			}
		}
	}
	return nil
}

// knownKey returns the schema's spelling of k.
func knownKey(want keys, k string) (string, bool) {
	if _, ok := want[k]; ok {
		return k, true
	}
	for name := range want {
		if strings.EqualFold(name, k) {
			return name, true
		}
	}
	return "", false
}
