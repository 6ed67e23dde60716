package dedupe

import (
	"fmt"
	"time"
)

// checkArgs returns an error wrapping [ErrInvalidArgument] for an empty key or
// owner or a non-positive d, and nil otherwise; Release, which takes no duration, passes
// 1. Every store refuses bad arguments alike (dedupe/storetest checks it): the stores of
// the nested modules (dedupe/redisdedupe, dedupe/pgdedupe) keep copies of this check,
// since a module never imports another module's internal code.
func checkArgs(key, owner string, d time.Duration) error {
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
