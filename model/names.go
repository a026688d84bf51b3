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

// LooksLikeID reports whether s reads as a run's id as tine shows it
// (ShortID), or more of one: 8 or more characters, all 0-9 or a-f. No run
// may be named so: a command given it would mean that run's id, whichever
// run has it now or later (Store.Resolve).
func LooksLikeID(s string) bool {
	return len(s) >= 8 && IsHex(s)
}

// IsHex reports whether s is all 0-9 and a-f, as run ids are.
func IsHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return s != ""
}

// NameLikeIDError is a run's name refused because commands would take it
// for a run's id: it looks like one (ID empty), or it is the start of run
// ID's id. It is ErrNameLikeID.
type NameLikeIDError struct{ Name, ID string }

// ErrNameLikeID: a name commands would take for a run's id.
var ErrNameLikeID = errors.New("run name looks like a run id")

func (e *NameLikeIDError) Error() string {
	if e.ID != "" {
		return fmt.Sprintf("the name %q is the start of run %s's id, which commands would take it for: choose another name", e.Name, ShortID(e.ID))
	}
	return fmt.Sprintf("the name %q looks like a run id (8 or more of 0-9 and a-f, as tine ls shows ids), which commands would take it for: put another letter or a dash in it", e.Name)
}

// Is makes errors.Is(err, ErrNameLikeID) hold.
func (e *NameLikeIDError) Is(target error) bool { return target == ErrNameLikeID }
