package model

import (
	"errors"
	"fmt"
)

// ErrNameTaken: another run has the name. A run's name says which run a
// command means, so no two runs share one (unnamed runs are many).
var ErrNameTaken = errors.New("run name taken")

// NameTakenError says which name is taken; it is ErrNameTaken.
type NameTakenError struct{ Name string }

func (e *NameTakenError) Error() string {
	return fmt.Sprintf("a run named %q exists already: names are unique", e.Name)
}

// Is makes errors.Is(err, ErrNameTaken) hold.
func (e *NameTakenError) Is(target error) bool { return target == ErrNameTaken }
