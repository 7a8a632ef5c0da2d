package server

import (
	"net/http"
	"reflect"
	"strconv"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// pageOptions are the list options of one page: Limit is always set (api.DefaultPageSize
// when the caller gave none), so no answer holds more than api.MaxPageSize objects.
type pageOptions store.ListOptions

// probe asks the store for one object more than the page, to learn whether another follows.
func (o pageOptions) probe() store.ListOptions {
	opts := store.ListOptions(o)
	opts.Limit++
	return opts
}

// page trims list (a *[]T read with probe) to the page and, when an object was left over,
// announces the next page's offset in api.HeaderNext.
func (o pageOptions) page(w http.ResponseWriter, list any) {
	v := reflect.ValueOf(list).Elem()
	if v.Len() <= o.Limit {
		return
	}
	v.Set(v.Slice(0, o.Limit))
	w.Header().Set(api.HeaderNext, strconv.Itoa(o.Offset+o.Limit))
}
