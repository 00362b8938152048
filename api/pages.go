package api

// Pages walks a listing the API pages by ID (jobs, batches), so that the
// client and the CLI follow the protocol one way: fetch returns the items
// after an ID and the ID to go on from, 0 at the end. Pages fetches the
// page after last, or with all every page from there, and returns the
// items and the ID to go on from (0: no more).
func Pages[T any](all bool, last int64, fetch func(last int64) ([]T, int64, error)) ([]T, int64, error) {
	var items []T
	for {
		page, next, err := fetch(last)
		if err != nil {
			return nil, 0, err
		}
		items = append(items, page...)
		last = next
		if !all || next == 0 {
			return items, next, nil
		}
	}
}
