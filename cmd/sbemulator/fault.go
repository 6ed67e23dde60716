package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest"
)

// faultSpec is a -fault flag: a fault for one entity (a queue, a topic for sends, or a
// subscription as topic/Subscriptions/name).
type faultSpec struct {
	entity string
	fault  sbtest.Fault
}

var faultOps = map[string]sbtest.Op{
	"send": sbtest.OpSend, "receive": sbtest.OpReceive, "complete": sbtest.OpComplete,
	"abandon": sbtest.OpAbandon, "deadletter": sbtest.OpDeadLetter, "defer": sbtest.OpDefer,
	"renew": sbtest.OpRenew, "accept-session": sbtest.OpAcceptSession,
	"renew-session-lock": sbtest.OpRenewSessionLock, "session-state": sbtest.OpSessionState,
}

// parseFault parses entity:op[:count[:error]].
func parseFault(s string) (faultSpec, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 4 || parts[0] == "" {
		return faultSpec{}, fmt.Errorf("%q: want entity:op[:count[:error]]", s)
	}
	f := faultSpec{entity: parts[0]}
	op, ok := faultOps[parts[1]]
	if !ok {
		return faultSpec{}, fmt.Errorf("%q: unknown op %q", s, parts[1])
	}
	f.fault.Op = op
	if len(parts) > 2 && parts[2] != "" {
		n, err := strconv.Atoi(parts[2])
		if err != nil || n < 0 {
			return faultSpec{}, fmt.Errorf("%q: count %q is not a number >= 0", s, parts[2])
		}
		f.fault.Count = n
	}
	kind := "transient"
	if len(parts) > 3 {
		kind = parts[3]
	}
	switch kind {
	case "transient":
		f.fault.Err = sbtest.TransientError
	case "lock-lost":
		f.fault.Err = &azservicebus.Error{Code: azservicebus.CodeLockLost}
	case "unauthorized":
		f.fault.Err = sbtest.PermanentError
	case "hang":
		f.fault.Hang = true
	default:
		return faultSpec{}, fmt.Errorf("%q: unknown error %q (transient, lock-lost, unauthorized, hang)", s, kind)
	}
	return f, nil
}

// injectFaults injects each fault into its entity: a topic takes send faults, a queue or
// subscription any.
func injectFaults(ns *sbtest.Namespace, faults []faultSpec) error {
	for _, f := range faults {
		if t, ok := ns.Topic(f.entity); ok {
			if f.fault.Op != sbtest.OpSend {
				return fmt.Errorf("sbemulator: -fault %s: a topic only takes send faults; name a subscription as topic/Subscriptions/name", f.entity)
			}
			t.InjectFault(f.fault)
			continue
		}
		e, ok := ns.Entity(f.entity)
		if !ok {
			return fmt.Errorf("sbemulator: -fault: no entity %q", f.entity)
		}
		e.InjectFault(f.fault)
	}
	return nil
}
