package pgdedupe

import (
	"fmt"
	"time"

	"github.com/sbkit/sbkit/dedupe"
)

// checkArgs returns an error wrapping [dedupe.ErrInvalidArgument] for an empty key or
// owner or a non-positive d, and nil otherwise; Release, which takes no duration, passes
// 1. Every store refuses bad arguments alike (dedupe/storetest checks it); this module
// keeps its own copy of the check rather than import the core's internal one, which
// carries no compatibility promise across versions.
func checkArgs(key, owner string, d time.Duration) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", dedupe.ErrInvalidArgument)
	case owner == "":
		return fmt.Errorf("%w: empty owner", dedupe.ErrInvalidArgument)
	case d <= 0:
		return fmt.Errorf("%w: non-positive duration %v", dedupe.ErrInvalidArgument, d)
	}
	return nil
}
