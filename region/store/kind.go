package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// querier is what both the pool and a transaction offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// column is a typed table column that a kind copies out of its api object.
type column struct {
	name  string
	value any
}

// dependents selects, for the identity $1 of an object, labels of the objects that keep it
// from being deleted (e.g. "machine birdy").
type dependents string

// kind describes how the api objects of one kind are stored; the CRUD code is shared.
// Every table has seq (internal row id and creation order), the columns of columns(), and doc.
type kind[T any] struct {
	name  string // api.Kind*, also the Kind of audit events
	noun  string // singular, for messages
	table string
	// self points at the field that identifies an object (Uuid, Name or Addr); it may not
	// change on Replace and is the Key of audit events.
	self func(*T) *string
	// genUUID: self is a UUID that Create fills when empty.
	genUUID bool
	// bare is the column a key without "Field:" matches ("uuid" or "name"); "" means keys
	// must be Field:value.
	bare string
	// keys maps fields to SQL conditions on $1 served by typed columns (faster than doc and
	// able to look into relation tables); other scalar fields are matched in doc.
	keys map[string]string
	// norm canonicalises key and filter values of a field (MACs, addresses, UUIDs).
	norm  map[string]func(string) (string, error)
	order string // ORDER BY of List
	// columns returns the typed columns, including the identity column.
	columns func(*T) []column
	// prepare sets defaults; old is nil on Create.
	prepare func(obj, old *T)
	// validate checks the object alone; check needs the database (in the transaction); old
	// is the stored state it replaces, nil on Create.
	validate func(*T) error
	check    func(ctx context.Context, tx pgx.Tx, obj, old *T) error
	// children rewrites relation tables after each write.
	children func(ctx context.Context, tx pgx.Tx, obj *T) error
	deps     []dependents
	// beforeDelete runs after deps found nothing; it may refuse (ErrInUse) or clean up.
	beforeDelete func(ctx context.Context, tx pgx.Tx, by Principal, obj *T, force bool) error

	fields map[string]fieldType // top-level JSON fields of T
}

type fieldType int

const (
	fieldScalar  fieldType = iota // string or time: compared as text
	fieldBool                     // true/false
	fieldInt                      // integer
	fieldStrings                  // []string: matches when the list contains the value
	fieldComplex                  // objects and other lists: not filterable
)

// kindOps is a kind with its type erased, so Store can dispatch on the kind name.
type kindOps interface {
	create(ctx context.Context, tx pgx.Tx, by Principal, obj any) error
	get(ctx context.Context, q querier, key string, out any) error
	list(ctx context.Context, q querier, opts ListOptions, out any) error
	replace(ctx context.Context, tx pgx.Tx, by Principal, key string, obj any) error
	remove(ctx context.Context, tx pgx.Tx, by Principal, key string, force bool) error
	// locked returns the object at key (a *T), locked for the rest of tx.
	locked(ctx context.Context, tx pgx.Tx, key string) (any, error)
}

// newKind completes a descriptor with the JSON fields of T.
func newKind[T any](k kind[T]) *kind[T] {
	k.fields = map[string]fieldType{}
	t := reflect.TypeFor[T]()
	timeType := reflect.TypeFor[time.Time]()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		ft := fieldComplex
		switch {
		case f.Type == timeType, f.Type.Kind() == reflect.String:
			ft = fieldScalar
		case f.Type.Kind() == reflect.Bool:
			ft = fieldBool
		case f.Type.Kind() >= reflect.Int && f.Type.Kind() <= reflect.Int64:
			ft = fieldInt
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.String:
			ft = fieldStrings
		}
		k.fields[name] = ft
	}
	return &k
}

func (k *kind[T]) typed(obj any) (*T, error) {
	t, ok := obj.(*T)
	if !ok {
		return nil, fmt.Errorf("store: %s need a %T, got %T", k.name, t, obj)
	}
	return t, nil
}

// where collects SQL conditions; each condition numbers its parameters $1, $2, ... and add
// renumbers them after the ones already collected.
type where struct {
	conds []string
	args  []any
}

var placeholder = regexp.MustCompile(`\$(\d+)`)

func (w *where) add(cond string, args ...any) {
	base := len(w.args)
	w.conds = append(w.conds, placeholder.ReplaceAllStringFunc(cond, func(p string) string {
		n, _ := strconv.Atoi(p[1:])
		return "$" + strconv.Itoa(base+n)
	}))
	w.args = append(w.args, args...)
}

func (w *where) sql() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// match adds the condition Field=value, used by Field:value keys and by List filters.
func (k *kind[T]) match(w *where, field, value string) error {
	if norm := k.norm[field]; norm != nil {
		v, err := norm(value)
		if err != nil {
			return err
		}
		value = v
	}
	if cond, ok := k.keys[field]; ok {
		w.add(cond, value)
		return nil
	}
	ft, ok := k.fields[field]
	if !ok {
		return invalidf("%s have no field %q", k.name, field)
	}
	switch ft {
	case fieldBool:
		b, err := strconv.ParseBool(value)
		if err != nil {
			return invalidf("%s is true or false, not %q", field, value)
		}
		value = strconv.FormatBool(b)
	case fieldInt:
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return invalidf("%s is a number, not %q", field, value)
		}
		value = strconv.FormatInt(n, 10)
	case fieldStrings:
		w.add("doc->$1 @> jsonb_build_array($2::text)", field, value)
		return nil
	case fieldComplex:
		return invalidf("%s cannot be matched on %s (not a plain value)", k.name, field)
	}
	w.add("doc->>$1 = $2", field, value)
	return nil
}

// keyWhere turns a key (UUID, Name or Field:value) into a condition.
func (k *kind[T]) keyWhere(key string) (*where, error) {
	w := &where{}
	if field, value, ok := strings.Cut(key, ":"); ok {
		return w, k.match(w, field, value)
	}
	switch k.bare {
	case "uuid":
		id, err := uuid.Parse(key)
		if err != nil {
			return nil, invalidf("%s key %q is neither a UUID nor Field:value (e.g. Name:%s)", k.noun, key, key)
		}
		w.add("uuid = $1", id.String())
	case "name":
		w.add("name = $1", key)
	default:
		return nil, invalidf("%s key %q: %s are addressed by Field:value keys (e.g. Addr:10.0.0.5)", k.noun, key, k.name)
	}
	return w, nil
}

// row is one stored object with its internal row id.
type row[T any] struct {
	seq int64
	obj *T
}

// selectRows returns the rows matching w in List order; suffix adds paging or FOR UPDATE.
func (k *kind[T]) selectRows(ctx context.Context, q querier, w *where, suffix string) ([]row[T], error) {
	rows, err := q.Query(ctx, "SELECT seq, doc FROM "+k.table+w.sql()+" ORDER BY "+k.order+suffix, w.args...)
	if err != nil {
		return nil, err
	}
	var out []row[T]
	for rows.Next() {
		var r row[T]
		var doc []byte
		if err := rows.Scan(&r.seq, &doc); err != nil {
			rows.Close()
			return nil, err
		}
		if r.obj, err = decode[T](doc); err != nil {
			rows.Close()
			return nil, fmt.Errorf("stored %s: %w", k.noun, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// resolve finds the one object at key.
func (k *kind[T]) resolve(ctx context.Context, q querier, key string, lock bool) (row[T], error) {
	w, err := k.keyWhere(key)
	if err != nil {
		return row[T]{}, err
	}
	suffix := " LIMIT 2"
	if lock {
		suffix += " FOR UPDATE"
	}
	rows, err := k.selectRows(ctx, q, w, suffix)
	switch {
	case err != nil:
		return row[T]{}, err
	case len(rows) == 0:
		return row[T]{}, notFoundf("%s %s not found", k.noun, key)
	case len(rows) > 1:
		return row[T]{}, invalidf("key %s matches several %s; use a unique key", key, k.name)
	}
	return rows[0], nil
}

func decode[T any](doc []byte) (*T, error) {
	v := new(T)
	if err := json.Unmarshal(doc, v); err != nil {
		return nil, err
	}
	return v, nil
}

// clone copies obj through JSON, so a failed write leaves the caller's object untouched.
func clone[T any](obj *T) (*T, error) {
	doc, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return decode[T](doc)
}

func (k *kind[T]) get(ctx context.Context, q querier, key string, out any) error {
	dst, err := k.typed(out)
	if err != nil {
		return err
	}
	r, err := k.resolve(ctx, q, key, false)
	if err != nil {
		return err
	}
	*dst = *r.obj
	return nil
}

func (k *kind[T]) locked(ctx context.Context, tx pgx.Tx, key string) (any, error) {
	r, err := k.resolve(ctx, tx, key, true)
	if err != nil {
		return nil, err
	}
	return r.obj, nil
}

func (k *kind[T]) list(ctx context.Context, q querier, opts ListOptions, out any) error {
	dst, ok := out.(*[]T)
	if !ok {
		return fmt.Errorf("store: List %s needs a %T, got %T", k.name, dst, out)
	}
	w := &where{}
	fields := make([]string, 0, len(opts.Filters))
	for f := range opts.Filters {
		fields = append(fields, f)
	}
	sort.Strings(fields)
	for _, f := range fields {
		if err := k.match(w, f, opts.Filters[f]); err != nil {
			return err
		}
	}
	page, err := pageSQL(opts)
	if err != nil {
		return err
	}
	rows, err := k.selectRows(ctx, q, w, page)
	if err != nil {
		return err
	}
	objs := make([]T, 0, len(rows))
	for _, r := range rows {
		objs = append(objs, *r.obj)
	}
	*dst = objs
	return nil
}

func pageSQL(opts ListOptions) (string, error) {
	if opts.Offset < 0 || opts.Limit < 0 {
		return "", invalidf("offset and limit may not be negative")
	}
	s := ""
	if opts.Limit > 0 {
		s += " LIMIT " + strconv.Itoa(opts.Limit)
	}
	if opts.Offset > 0 {
		s += " OFFSET " + strconv.Itoa(opts.Offset)
	}
	return s, nil
}

func normalize(obj any) {
	if n, ok := obj.(interface{ Normalize() }); ok {
		n.Normalize()
	}
}

func (k *kind[T]) create(ctx context.Context, tx pgx.Tx, by Principal, obj any) error {
	orig, err := k.typed(obj)
	if err != nil {
		return err
	}
	work, err := clone(orig)
	if err != nil {
		return err
	}
	normalize(work)
	if id := k.self(work); k.genUUID && *id == "" {
		*id = uuid.NewString()
	}
	stored, err := k.write(ctx, tx, by, 0, row[T]{}, work)
	if err != nil {
		return err
	}
	*orig = *stored
	return nil
}

func (k *kind[T]) replace(ctx context.Context, tx pgx.Tx, by Principal, key string, obj any) error {
	orig, err := k.typed(obj)
	if err != nil {
		return err
	}
	r, err := k.resolve(ctx, tx, key, true)
	if err != nil {
		return err
	}
	work, err := clone(orig)
	if err != nil {
		return err
	}
	normalize(work)
	id, was := k.self(work), *k.self(r.obj)
	switch {
	case *id == "":
		*id = was
	case !strings.EqualFold(*id, was):
		return invalidf("%s %s: its identity cannot change from %q to %q", k.noun, key, was, *id)
	}
	*id = was
	stored, err := k.write(ctx, tx, by, r.seq, r, work)
	if err != nil {
		return err
	}
	*orig = *stored
	return nil
}

// write validates obj and inserts it (seq 0) or updates row seq whose previous state is old,
// rewrites the relation tables and records the audit event. It returns the stored object.
func (k *kind[T]) write(ctx context.Context, tx pgx.Tx, by Principal, seq int64, old row[T], obj *T) (*T, error) {
	if k.genUUID {
		id, err := uuid.Parse(*k.self(obj))
		if err != nil {
			return nil, invalidf("%s Uuid %q is not a UUID", k.noun, *k.self(obj))
		}
		*k.self(obj) = id.String()
	}
	if k.prepare != nil {
		k.prepare(obj, old.obj)
	}
	if err := k.validate(obj); err != nil {
		return nil, err
	}
	if k.check != nil {
		if err := k.check(ctx, tx, obj, old.obj); err != nil {
			return nil, err
		}
	}
	doc, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", k.noun, err)
	}
	action, details := "create", map[string]any{}
	if seq == 0 {
		err = k.insertRow(ctx, tx, obj, doc)
	} else {
		var before []byte
		if before, err = json.Marshal(old.obj); err != nil { // re-encoded: jsonb reorders the keys of the stored doc
			return nil, fmt.Errorf("encode stored %s: %w", k.noun, err)
		}
		action, details = "update", map[string]any{"Changed": changedFields(before, doc)}
		err = k.updateRow(ctx, tx, seq, obj, doc)
	}
	if err != nil {
		return nil, err
	}
	if k.children != nil {
		if err := k.children(ctx, tx, obj); err != nil {
			return nil, err
		}
	}
	if err := recordEvent(ctx, tx, by, action, k.name, *k.self(obj), details); err != nil {
		return nil, err
	}
	return decode[T](doc)
}

func (k *kind[T]) insertRow(ctx context.Context, tx pgx.Tx, obj *T, doc []byte) error {
	names, args := k.rowValues(obj, doc)
	marks := make([]string, len(names))
	for i := range marks {
		marks[i] = "$" + strconv.Itoa(i+1)
	}
	_, err := tx.Exec(ctx, "INSERT INTO "+k.table+" ("+strings.Join(names, ", ")+") VALUES ("+strings.Join(marks, ", ")+")", args...)
	return err
}

func (k *kind[T]) updateRow(ctx context.Context, tx pgx.Tx, seq int64, obj *T, doc []byte) error {
	names, args := k.rowValues(obj, doc)
	sets := make([]string, len(names))
	for i, n := range names {
		sets[i] = n + " = $" + strconv.Itoa(i+1)
	}
	args = append(args, seq)
	_, err := tx.Exec(ctx, "UPDATE "+k.table+" SET "+strings.Join(sets, ", ")+" WHERE seq = $"+strconv.Itoa(len(args)), args...)
	return err
}

// rowValues returns the column names and values of a table row holding obj.
func (k *kind[T]) rowValues(obj *T, doc []byte) ([]string, []any) {
	cols := k.columns(obj)
	names := make([]string, 0, len(cols)+1)
	args := make([]any, 0, len(cols)+2)
	for _, c := range cols {
		names = append(names, c.name)
		args = append(args, c.value)
	}
	return append(names, "doc"), append(args, doc)
}

// changedFields lists the top-level fields that differ between two documents.
func changedFields(before, after []byte) []string {
	var a, b map[string]json.RawMessage
	_ = json.Unmarshal(before, &a) // both documents were produced by json.Marshal
	_ = json.Unmarshal(after, &b)
	changed := []string{}
	for f, v := range b {
		if string(a[f]) != string(v) {
			changed = append(changed, f)
		}
	}
	for f := range a {
		if _, ok := b[f]; !ok {
			changed = append(changed, f)
		}
	}
	sort.Strings(changed)
	return changed
}

func (k *kind[T]) remove(ctx context.Context, tx pgx.Tx, by Principal, key string, force bool) error {
	r, err := k.resolve(ctx, tx, key, true)
	if err != nil {
		return err
	}
	id := *k.self(r.obj)
	var deps []string
	for _, q := range k.deps {
		labels, err := queryStrings(ctx, tx, string(q), id)
		if err != nil {
			return err
		}
		deps = append(deps, labels...)
	}
	if len(deps) > 0 {
		return &DependencyError{Kind: k.noun, Key: id, Dependents: deps}
	}
	if k.beforeDelete != nil {
		if err := k.beforeDelete(ctx, tx, by, r.obj, force); err != nil {
			return err
		}
	}
	return k.deleteRow(ctx, tx, by, r, map[string]any{})
}

// deleteRow deletes a resolved row and records the event.
func (k *kind[T]) deleteRow(ctx context.Context, tx pgx.Tx, by Principal, r row[T], details map[string]any) error {
	id := *k.self(r.obj)
	if _, err := tx.Exec(ctx, "DELETE FROM "+k.table+" WHERE seq = $1", r.seq); err != nil {
		if pgErr := pgError(err); pgErr != nil && pgErr.Code == errForeignKey {
			table := "other objects"
			if m := detailTable.FindStringSubmatch(pgErr.Detail); m != nil {
				table = m[1]
			}
			return &DependencyError{Kind: k.noun, Key: id, Dependents: []string{table}}
		}
		return err
	}
	return recordEvent(ctx, tx, by, "delete", k.name, id, details)
}

// queryStrings runs a query that returns one text column and collects its values.
func queryStrings(ctx context.Context, q querier, sql string, args ...any) ([]string, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	return out, nil
}

// queryFirst scans the first row a query selects into dest and reports whether there was one.
func queryFirst(ctx context.Context, q querier, sql string, args []any, dest ...any) (bool, error) {
	err := q.QueryRow(ctx, sql, args...).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}
