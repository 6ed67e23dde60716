package dedupe

import (
	"fmt"
	"time"
)

// CheckArgs is the check of its arguments every [Store] makes first: it returns an error
// wrapping [ErrInvalidArgument] for an empty key or owner or a non-positive d, and nil
// otherwise; Release, which takes no duration, passes 1. The stores of this module and
// of dedupe/redisdedupe and dedupe/pgdedupe call it, and a store of your own can, so that
// every store refuses bad arguments alike (dedupe/storetest checks it). Safe for
// concurrent use.
func CheckArgs(key, owner string, d time.Duration) error {
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
