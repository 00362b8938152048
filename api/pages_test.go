package api

import (
	"errors"
	"slices"
	"testing"
)

func TestPages(t *testing.T) {
	// Three pages: 1-2, 3-4, 5.
	fetch := func(last int64) ([]int64, int64, error) {
		var page []int64
		for id := last + 1; id <= min(last+2, 5); id++ {
			page = append(page, id)
		}
		next := last + 2
		if next >= 5 {
			next = 0
		}
		return page, next, nil
	}
	if got, next, err := Pages(false, 0, fetch); err != nil || !slices.Equal(got, []int64{1, 2}) || next != 2 {
		t.Errorf("one page: %v next %d %v", got, next, err)
	}
	if got, next, err := Pages(false, 2, fetch); err != nil || !slices.Equal(got, []int64{3, 4}) || next != 4 {
		t.Errorf("the page after 2: %v next %d %v", got, next, err)
	}
	if got, next, err := Pages(true, 0, fetch); err != nil || !slices.Equal(got, []int64{1, 2, 3, 4, 5}) || next != 0 {
		t.Errorf("every page: %v next %d %v", got, next, err)
	}
	boom := errors.New("boom")
	if got, _, err := Pages(true, 0, func(int64) ([]int64, int64, error) { return nil, 0, boom }); !errors.Is(err, boom) || got != nil {
		t.Errorf("an error: %v %v", got, err)
	}
}
