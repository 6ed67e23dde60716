// Package storeargs checks the arguments of [dedupe.Store] methods for the stores of
// sbkit's modules (memory, Redis, PostgreSQL), so that they refuse bad arguments alike;
// package dedupe/storetest checks that every store does.
package storeargs

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidArgument is dedupe.ErrInvalidArgument: package dedupe exports it.
var ErrInvalidArgument = errors.New("dedupe: invalid argument")

// Check returns an error wrapping ErrInvalidArgument for an empty key or owner or a
// non-positive d, and nil otherwise. Release, which takes no duration, passes 1.
func Check(key, owner string, d time.Duration) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidArgument)
	case owner == "":
		return fmt.Errorf("%w: empty owner", ErrInvalidArgument)
	case d <= 0:
		return fmt.Errorf("%w: non-positive duration %v", ErrInvalidArgument, d)
	}
	return nil
}
