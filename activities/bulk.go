package activities

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"

	"github.com/ironflow/ironflow/region/api"
)

// ErrTypeInvalidSelector is the error type of a selector that selects nothing by construction.
const ErrTypeInvalidSelector = "InvalidSelector"

// Selector chooses machines on a region for a bulk migration: every machine of Pool and/or
// Rack (both given: machines in both), or the machines Names lists.
type Selector struct {
	Pool  string   `json:",omitempty"`
	Rack  string   `json:",omitempty"` // rack UUID
	Names []string `json:",omitempty"`
}

// Check refuses a selector with no criterion, with empty names, or mixing Names with
// Pool/Rack. It is pure, so workflows call it too.
func (s Selector) Check() error {
	switch {
	case s.Pool == "" && s.Rack == "" && len(s.Names) == 0:
		return errors.New("the selector is empty: give a pool, a rack or machine names")
	case len(s.Names) > 0 && (s.Pool != "" || s.Rack != ""):
		return errors.New("the selector mixes machine names with a pool or rack: give one or the other")
	case slices.Contains(s.Names, ""):
		return errors.New("the selector lists an empty machine name")
	}
	return nil
}

// String describes the selector for messages.
func (s Selector) String() string {
	var parts []string
	if s.Pool != "" {
		parts = append(parts, "pool "+s.Pool)
	}
	if s.Rack != "" {
		parts = append(parts, "rack "+s.Rack)
	}
	if len(s.Names) > 0 {
		parts = append(parts, "names "+strings.Join(s.Names, ","))
	}
	return strings.Join(parts, " and ")
}

// SelectInput names the region whose machines a Selector chooses.
type SelectInput struct {
	Region   string
	Selector Selector
	// TargetRegion and Grant: the region grants the bulk migration to TargetRegion (grants.go).
	TargetRegion string `json:",omitempty"`
	Grant        string `json:",omitempty"`
}

// MachineLister is what SelectMachines needs beyond Region: a filtered machine list.
// ClientRegion implements it; a Region without it cannot resolve pool or rack selectors.
type MachineLister interface {
	ListMachines(ctx context.Context, filters url.Values) ([]api.Machine, error)
}

// ListMachines lists the machines matching DRP-style exact-match filters.
func (c ClientRegion) ListMachines(ctx context.Context, filters url.Values) ([]api.Machine, error) {
	return c.Machines().List(ctx, filters)
}

// SelectMachines resolves a selector on a region into machine UUIDs, sorted and without
// duplicates so the workflow's order is deterministic. Locked stubs of machines already
// migrated away are left out of pool and rack selections (they stay in their pool after a
// migration that keeps its stub); a named machine that does not exist is a non-retryable
// error naming it. Runs of BulkMigrate recorded before it paged its selection call it; later
// runs call SelectMachinesPage, whose answer stays bounded whatever the selection's size.
func (a *Activities) SelectMachines(ctx context.Context, in SelectInput) ([]string, error) {
	r, err := a.selectionRegion(ctx, in)
	if err != nil {
		return nil, err
	}
	var uuids []string
	if len(in.Selector.Names) > 0 {
		uuids, err = byName(ctx, r, in.Region, in.Selector.Names)
	} else {
		uuids, err = byFilters(ctx, r, in.Region, in.Selector)
	}
	if err != nil {
		return nil, err
	}
	slices.Sort(uuids)
	return slices.Compact(uuids), nil
}

// MaxSelectPage bounds the machines one SelectMachinesPage answers: 1,000 UUIDs are some
// 40 KB of payload.
const MaxSelectPage = 1000

// SelectPageInput asks for the next page of a selection: up to Limit machines after the
// cursor After.
type SelectPageInput struct {
	SelectInput
	// After is the Last of the page before; "" asks for the first page, the only one that
	// verifies the grant (a later run's grant may have expired; the children it starts verify
	// it as children of the move the first page verified).
	After string `json:",omitempty"`
	Limit int    // 1..MaxSelectPage
}

// SelectPage is one page of a selection.
type SelectPage struct {
	Machines []string // UUIDs, in the selection's order
	// NotFound are names of a Names selector that no machine has any more (a later page: the
	// first refuses a selection naming a machine that does not exist).
	NotFound []string `json:",omitempty"`
	// Last is the cursor of the next page: the last UUID of the page, for a Names selector
	// its last name.
	Last string `json:",omitempty"`
	// Left is how many machines the selection has after After, this page's included.
	Left int
}

// SelectMachinesPage resolves one page of a selector on a region. Pool and rack selections
// are in UUID order and read as the region lists them now: a machine migrated away (a stub,
// or gone) is not listed again, one that joins the pool after the cursor is. A Names
// selection is in the order of its sorted names, resolved a page at a time; its first page
// checks that every name exists.
func (a *Activities) SelectMachinesPage(ctx context.Context, in SelectPageInput) (SelectPage, error) {
	if in.Limit < 1 || in.Limit > MaxSelectPage {
		return SelectPage{}, nonRetryable(ErrTypeInvalidSelector, "a page of %d machines is not between 1 and %d", in.Limit, MaxSelectPage)
	}
	var r Region
	var err error
	if in.After == "" {
		r, err = a.selectionRegion(ctx, in.SelectInput)
	} else {
		r, err = a.Regions.Region(in.Region)
	}
	if err != nil {
		return SelectPage{}, err
	}
	if len(in.Selector.Names) > 0 {
		return namesPage(ctx, r, in)
	}
	uuids, err := byFilters(ctx, r, in.Region, in.Selector)
	if err != nil {
		return SelectPage{}, err
	}
	uuids = uuids[sortedAfter(uuids, in.After):]
	page := SelectPage{Machines: uuids[:min(len(uuids), in.Limit)], Left: len(uuids)}
	if len(page.Machines) > 0 {
		page.Last = page.Machines[len(page.Machines)-1]
	}
	return page, nil
}

// namesPage resolves the names of a Names selection after in.After, up to in.Limit.
func namesPage(ctx context.Context, r Region, in SelectPageInput) (SelectPage, error) {
	names := uniqueNames(in.Selector.Names)
	names = names[sortedAfter(names, in.After):]
	page := SelectPage{Left: len(names)}
	names = names[:min(len(names), in.Limit)]
	if len(names) > 0 {
		page.Last = names[len(names)-1]
	}
	if in.After == "" {
		// The whole selection is checked once, so a name given wrong refuses the run before
		// any machine moves, as the selection of one page did.
		all, err := byName(ctx, r, in.Region, uniqueNames(in.Selector.Names))
		if err != nil {
			return SelectPage{}, err
		}
		page.Machines = all[:len(names)]
		return page, nil
	}
	for _, name := range names {
		uuid, err := machineNamed(ctx, r, in.Region, name)
		switch {
		case err != nil:
			return SelectPage{}, err
		case uuid == "":
			page.NotFound = append(page.NotFound, name)
		default:
			page.Machines = append(page.Machines, uuid)
		}
	}
	return page, nil
}

// selectionRegion checks the selector and has the region verify the bulk grant.
func (a *Activities) selectionRegion(ctx context.Context, in SelectInput) (Region, error) {
	if err := in.Selector.Check(); err != nil {
		return nil, nonRetryable(ErrTypeInvalidSelector, "%v", err)
	}
	r, err := a.Regions.Region(in.Region)
	if err != nil {
		return nil, err
	}
	check := api.GrantCheck{Grant: in.Grant, TargetRegion: in.TargetRegion, Kind: api.GrantBulk, Migration: workflowID(ctx)}
	if _, err := verifyGrant(ctx, r, in.Region, check); err != nil {
		return nil, err
	}
	return r, nil
}

// uniqueNames is names sorted, each once.
func uniqueNames(names []string) []string {
	return slices.Compact(slices.Sorted(slices.Values(names)))
}

// sortedAfter is the index of the first element of sorted after cursor ("": the first).
func sortedAfter(sorted []string, cursor string) int {
	i, found := slices.BinarySearch(sorted, cursor)
	if found {
		i++
	}
	return i
}

// byName resolves names into the UUIDs of their machines, in the order of names; a name no
// machine has is a non-retryable error naming every such name.
func byName(ctx context.Context, r Region, region string, names []string) ([]string, error) {
	uuids := make([]string, 0, len(names))
	var missing []string
	for _, name := range names {
		uuid, err := machineNamed(ctx, r, region, name)
		switch {
		case err != nil:
			return nil, err
		case uuid == "":
			missing = append(missing, name)
		default:
			uuids = append(uuids, uuid)
		}
	}
	if len(missing) > 0 {
		return nil, nonRetryable(ErrTypeMachineNotFound, "machines not found on region %s: %s", region, strings.Join(missing, ", "))
	}
	return uuids, nil
}

// machineNamed is the UUID of the machine called name on region, "" when there is none.
func machineNamed(ctx context.Context, r Region, region, name string) (string, error) {
	m, err := r.GetMachine(ctx, "Name:"+name)
	switch {
	case isNotFound(err):
		return "", nil
	case err != nil:
		return "", classify(err, "get machine %s on %s", name, region)
	}
	return m.Uuid, nil
}

// byFilters lists the machines of a pool and/or rack selector, sorted by UUID, stubs left out.
func byFilters(ctx context.Context, r Region, region string, s Selector) ([]string, error) {
	lister, ok := r.(MachineLister)
	if !ok {
		return nil, nonRetryable(ErrTypeInvalidSelector, "region %s cannot list machines (%T has no ListMachines)", region, r)
	}
	filters := url.Values{}
	if s.Pool != "" {
		filters.Set("Pool", s.Pool)
	}
	if s.Rack != "" {
		filters.Set("Rack", s.Rack)
	}
	machines, err := lister.ListMachines(ctx, filters)
	if err != nil {
		return nil, classify(err, "list machines of %s on %s", s, region)
	}
	uuids := make([]string, 0, len(machines))
	for _, m := range machines {
		if m.Meta[api.MetaRedirectEndpoint] == "" {
			uuids = append(uuids, m.Uuid)
		}
	}
	slices.Sort(uuids)
	return slices.Compact(uuids), nil
}
