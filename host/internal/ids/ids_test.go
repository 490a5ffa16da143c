package ids

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// timeIDForm is a time-ordered id: the prefix, then 26 digits of
// Crockford's base32 in lower case, the first at most 7 (130 bits hold
// 128).
var timeIDForm = regexp.MustCompile(`^thr_[0-7][0-9a-hjkmnp-tv-z]{25}$`)

// A ULID's time digits are the ones its specification gives for a known
// instant, and its random digits follow from the seed alone.
func TestTimeIDIsAULID(t *testing.T) {
	at := time.UnixMilli(1469918176385) // the ULID specification's example
	id := Seeded(1).NewTimeID("thr", at)
	if !timeIDForm.MatchString(id) || !strings.HasPrefix(id, "thr_01aryz6s41") {
		t.Errorf("NewTimeID(%s) = %s; want thr_01aryz6s41 and 16 random digits", at, id)
	}
	if again := Seeded(1).NewTimeID("thr", at); again != id {
		t.Errorf("the same seed and time gave %s, then %s", id, again)
	}
	if other := Seeded(2).NewTimeID("thr", at); other[:14] != id[:14] || other == id {
		t.Errorf("another seed at the same time gave %s after %s; want the same time digits, other random ones", other, id)
	}
}

// One allocator's ids sort in the order it made them, whatever the times
// it was given: later ones, the same millisecond, or a clock that went
// back.
func TestTimeIDsSortInTheOrderMade(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		at := time.UnixMilli(rapid.Int64Range(0, maxMillis-1<<20).Draw(rt, "start"))
		steps := rapid.SliceOfN(rapid.Int64Range(-5, 5), 1, 50).Draw(rt, "steps")
		a := Seeded(rapid.Uint64().Draw(rt, "seed"))
		var made []string
		for i, step := range steps {
			at = at.Add(time.Duration(step) * time.Millisecond)
			id := a.NewTimeID("thr", at)
			if !timeIDForm.MatchString(id) {
				rt.Fatalf("id %d = %q; not thr_ and 26 base32 digits", i, id)
			}
			made = append(made, id)
		}
		for i := 1; i < len(made); i++ {
			if made[i] <= made[i-1] {
				rt.Fatalf("id %d (%s) does not sort after id %d (%s)", i, made[i], i-1, made[i-1])
			}
		}
	})
}

// Across allocators, an id of a later millisecond sorts after, whatever
// the random bits.
func TestTimeIDsSortByTime(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		early := rapid.Int64Range(0, maxMillis-1).Draw(rt, "early")
		late := rapid.Int64Range(early+1, maxMillis).Draw(rt, "late")
		a := Seeded(rapid.Uint64().Draw(rt, "seed a")).NewTimeID("thr", time.UnixMilli(early))
		b := Seeded(rapid.Uint64().Draw(rt, "seed b")).NewTimeID("thr", time.UnixMilli(late))
		if b <= a {
			rt.Fatalf("%s (ms %d) does not sort after %s (ms %d)", b, late, a, early)
		}
	})
}

// Carrying over 80 random bits moves the time on by one millisecond.
func TestTimeIDCarry(t *testing.T) {
	s := stamp{ms: 7, hi: 1<<16 - 1, lo: ^uint64(0)}
	if got, want := s.next(), (stamp{ms: 8}); got != want {
		t.Errorf("next of %+v = %+v; want %+v", s, got, want)
	}
	if got, want := (stamp{ms: 7, hi: 3, lo: ^uint64(0)}).next(), (stamp{ms: 7, hi: 4}); got != want {
		t.Errorf("next carries into hi: got %+v; want %+v", got, want)
	}
	if got := millis(time.UnixMilli(-1)); got != 0 {
		t.Errorf("millis before 1970 = %d; want 0", got)
	}
	if got := millis(time.UnixMilli(maxMillis + 1)); got != maxMillis {
		t.Errorf("millis after the year 10889 = %d; want %d", got, maxMillis)
	}
}

// A seeded allocator's other ids are the same whatever times its
// time-ordered ids were given: the random bits are drawn either way.
func TestTimeIDsLeaveOtherIDsAlone(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	ids := func(times ...time.Time) []string {
		a := Seeded(9)
		var out []string
		for _, tm := range times {
			a.NewTimeID("thr", tm)
			out = append(out, a.NewID("run"))
		}
		return out
	}
	same, later := ids(at, at, at), ids(at, at.Add(time.Hour), at.Add(2*time.Hour))
	if !slices.Equal(same, later) {
		t.Errorf("run ids after thread ids of one instant %v; of later instants %v", same, later)
	}
}
