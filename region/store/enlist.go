package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

// Enlistment (region/api/enlist.go): a booting machine's report is matched against every
// machine by all the identities it carries, under one advisory lock so that two racks
// reporting the same machine at the same moment find one another's machine instead of
// creating two; the unique MAC and identity constraints hold the same line for every other
// writer.

// enlistLock is the pg_advisory_xact_lock key that serialises enlistments ("enlist").
const enlistLock int64 = 0x656e6c697374

// identity is a machine identity besides its MACs, as machine_identities stores it.
type identity struct{ kind, value string }

const (
	idSystemUUID = api.IdentitySystemUUID
	idSerial     = api.IdentitySerial // value: Fingerprint.SSNHash
	idBMC        = api.IdentityBMC
)

func (i identity) String() string {
	switch i.kind {
	case idSystemUUID:
		return "SMBIOS UUID " + i.value
	case idSerial:
		return "serial (SSNHash " + i.value + ")"
	}
	return "BMC address " + i.value
}

// placeholderUUIDs are SMBIOS UUIDs that many boards share: they identify nothing.
var placeholderUUIDs = []string{"00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff",
	"03000200-0400-0500-0006-000700080009"}

// systemUUID is the identity value of an SMBIOS UUID, "" for none or a placeholder.
func systemUUID(s string) string {
	id, err := uuid.Parse(strings.TrimSpace(s))
	if err != nil || slices.Contains(placeholderUUIDs, id.String()) {
		return ""
	}
	return id.String()
}

// placeholderSerials are what firmware reports when nobody set a serial.
var placeholderSerials = []string{"", "0", "none", "n/a", "na", "unknown", "not specified", "not applicable", "default string",
	"to be filled by o.e.m.", "system serial number", "chassis serial number", "serial", "0123456789", "123456789"}

// SSNHash is the Fingerprint.SSNHash of a system serial number: its SHA-256 in hex, "" for a
// placeholder serial or one made of one repeated character ("00000000").
func SSNHash(serial string) string {
	s := strings.TrimSpace(serial)
	lower := strings.ToLower(s)
	if slices.Contains(placeholderSerials, lower) || strings.Count(lower, lower[:1]) == len(lower) {
		return ""
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// machineIdentities are the identities m is matched by besides its MACs.
func machineIdentities(m *api.Machine) []identity {
	var ids []identity
	if v := systemUUID(m.Fingerprint.SystemUUID); v != "" {
		ids = append(ids, identity{idSystemUUID, v})
	}
	if m.Fingerprint.SSNHash != "" {
		ids = append(ids, identity{idSerial, strings.ToLower(m.Fingerprint.SSNHash)})
	}
	if m.BMCAddress != "" {
		ids = append(ids, identity{idBMC, m.BMCAddress})
	}
	return ids
}

// replaceIdentities makes machine_identities hold exactly m's identities.
func replaceIdentities(ctx context.Context, tx pgx.Tx, m *api.Machine) error {
	if _, err := tx.Exec(ctx, "DELETE FROM machine_identities WHERE machine = $1", m.Uuid); err != nil {
		return err
	}
	for _, id := range machineIdentities(m) {
		if _, err := tx.Exec(ctx, "INSERT INTO machine_identities (kind, value, machine) VALUES ($1, $2, $3)", id.kind, id.value, m.Uuid); err != nil {
			return err
		}
	}
	return nil
}

// report is an enlistment checked and reduced to what matching and recording need.
type report struct {
	e    api.Enlistment
	macs []string // canonical; the booting interface first
	// The identities the report carries; "" where it carries none.
	systemUUID, ssnHash, bmc string
	arch                     string            // GOARCH
	ownerNames               map[string]string // names of the machines holding its identities, by UUID
}

func (r *report) identities() []identity {
	m := api.Machine{Fingerprint: api.Fingerprint{SystemUUID: r.systemUUID, SSNHash: r.ssnHash}, BMCAddress: r.bmc}
	return machineIdentities(&m)
}

var archToken = regexp.MustCompile(`^[a-z0-9_-]{0,16}$`)

// buildArches maps iPXE's ${buildarch} to Machine.Arch. ${buildarch} is the architecture
// iPXE was built for, not the CPU's: every BIOS iPXE (QEMU's ROMs, undionly.kpxe) is i386,
// on 64-bit machines too, so i386 says nothing and leaves Arch to the inventory
// (TestQEMUUnknownMachineEnlists saw buildarch i386 on QEMU's x86_64 machine).
var buildArches = map[string]string{"x86_64": "amd64", "arm64": "arm64", "arm32": "arm", "riscv64": "riscv64"}

// textField refuses a reported value that is too long or holds control characters.
func textField(field, v string) error {
	switch {
	case len(v) > api.MaxEnlistValue:
		return invalidf("enlistment %s is %d bytes long (at most %d)", field, len(v), api.MaxEnlistValue)
	case !utf8.ValidString(v) || strings.ContainsFunc(v, unicode.IsControl):
		return invalidf("enlistment %s %q holds control characters or invalid UTF-8", field, v)
	}
	return nil
}

func textFields(fields map[string]string) error {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := textField(n, fields[n]); err != nil {
			return err
		}
	}
	return nil
}

// parseEnlistment checks a report; anything wrong refuses all of it.
func parseEnlistment(e api.Enlistment) (*report, error) {
	if e.Boot == nil && e.Inventory == nil {
		return nil, invalidf("an enlistment reports Boot facts, an Inventory or both")
	}
	r := &report{e: e}
	seen := map[string]bool{}
	addMAC := func(field, s string) error {
		mac, err := net.ParseMAC(s)
		if err != nil || len(mac) != 6 {
			return invalidf("enlistment %s %q is not a MAC address", field, s)
		}
		if !seen[mac.String()] {
			seen[mac.String()] = true
			r.macs = append(r.macs, mac.String())
		}
		return nil
	}
	if b := e.Boot; b != nil {
		if err := textFields(map[string]string{"Boot.UUID": b.UUID, "Boot.Serial": b.Serial, "Boot.Manufacturer": b.Manufacturer,
			"Boot.Product": b.Product, "Boot.BuildArch": b.BuildArch, "Boot.Platform": b.Platform}); err != nil {
			return nil, err
		}
		if !archToken.MatchString(b.BuildArch) || !archToken.MatchString(b.Platform) {
			return nil, invalidf("enlistment Boot.BuildArch %q or Boot.Platform %q is not an iPXE architecture or platform", b.BuildArch, b.Platform)
		}
		if b.UUID != "" {
			if _, err := uuid.Parse(b.UUID); err != nil {
				return nil, invalidf("enlistment Boot.UUID %q is not a UUID", b.UUID)
			}
		}
		if err := canonUUID("enlistment", "Boot.Rack", &b.Rack, true); err != nil {
			return nil, err
		}
		if err := addMAC("Boot.MAC", b.MAC); err != nil {
			return nil, err
		}
		r.systemUUID, r.ssnHash, r.arch = systemUUID(b.UUID), SSNHash(b.Serial), buildArches[b.BuildArch]
	}
	if inv := e.Inventory; inv != nil {
		if err := checkInventory(inv); err != nil {
			return nil, err
		}
		for i, ifc := range inv.Interfaces {
			if err := addMAC(fmt.Sprintf("Inventory.Interfaces[%d].MAC", i), ifc.MAC); err != nil {
				return nil, err
			}
		}
		if inv.BMCAddress != "" {
			a, err := netip.ParseAddr(inv.BMCAddress)
			if err != nil {
				return nil, invalidf("enlistment Inventory.BMCAddress %q is not an IP address", inv.BMCAddress)
			}
			r.bmc = a.String()
		}
		if err := agree("SMBIOS UUID", &r.systemUUID, systemUUID(inv.SMBIOS.UUID)); err != nil {
			return nil, err
		}
		if err := agree("serial", &r.ssnHash, SSNHash(inv.SMBIOS.Serial)); err != nil {
			return nil, err
		}
		if r.arch == "" {
			r.arch = inv.Arch
		}
	}
	if len(r.macs) == 0 {
		return nil, invalidf("an enlistment reports at least one MAC address")
	}
	if len(r.macs) > api.MaxEnlistMACs {
		return nil, invalidf("an enlistment reports at most %d MAC addresses, not %d", api.MaxEnlistMACs, len(r.macs))
	}
	return r, checkCommissioning(e.Commissioning)
}

// agree sets *v to other, refusing two different values for one identity in one report.
func agree(what string, v *string, other string) error {
	if other == "" {
		return nil
	}
	if *v != "" && *v != other {
		return invalidf("the enlistment reports two %ss: %s from iPXE and %s from the system", what, *v, other)
	}
	*v = other
	return nil
}

func checkInventory(inv *api.Inventory) error {
	if len(inv.Interfaces) > api.MaxEnlistMACs || len(inv.Disks) > api.MaxEnlistMACs {
		return invalidf("an enlistment inventory lists at most %d interfaces and %d disks", api.MaxEnlistMACs, api.MaxEnlistMACs)
	}
	fields := map[string]string{"Inventory.Hostname": inv.Hostname, "Inventory.Arch": inv.Arch, "Inventory.CPU.Model": inv.CPU.Model,
		"Inventory.SMBIOS.Manufacturer": inv.SMBIOS.Manufacturer, "Inventory.SMBIOS.Product": inv.SMBIOS.Product,
		"Inventory.SMBIOS.Serial": inv.SMBIOS.Serial, "Inventory.SMBIOS.UUID": inv.SMBIOS.UUID,
		"Inventory.SMBIOS.BIOSVendor": inv.SMBIOS.BIOSVendor, "Inventory.SMBIOS.BIOSVersion": inv.SMBIOS.BIOSVersion}
	for i, ifc := range inv.Interfaces {
		fields[fmt.Sprintf("Inventory.Interfaces[%d].Name", i)] = ifc.Name
		if len(ifc.Addrs) > 16 {
			return invalidf("enlistment interface %s lists %d addresses (at most 16)", ifc.Name, len(ifc.Addrs))
		}
		for j, a := range ifc.Addrs {
			if _, err := netip.ParsePrefix(a); err != nil {
				return invalidf("enlistment Inventory.Interfaces[%d].Addrs[%d] %q is not an address/prefix", i, j, a)
			}
		}
	}
	for i, d := range inv.Disks {
		fields[fmt.Sprintf("Inventory.Disks[%d].Name", i)] = d.Name
		fields[fmt.Sprintf("Inventory.Disks[%d].Model", i)] = d.Model
		fields[fmt.Sprintf("Inventory.Disks[%d].Serial", i)] = d.Serial
		if d.SizeBytes < 0 {
			return invalidf("enlistment disk %s has a negative size", d.Name)
		}
	}
	if inv.MemoryMiB < 0 || inv.CPU.Count < 0 {
		return invalidf("enlistment memory and CPU count may not be negative")
	}
	if !archToken.MatchString(inv.Arch) {
		return invalidf("enlistment Inventory.Arch %q is not an architecture", inv.Arch)
	}
	return textFields(fields)
}

func checkCommissioning(results []api.CommissioningResult) error {
	if len(results) > api.MaxCommissioning {
		return invalidf("an enlistment uploads at most %d commissioning results, not %d", api.MaxCommissioning, len(results))
	}
	for i, c := range results {
		if err := textField(fmt.Sprintf("Commissioning[%d].Script", i), c.Script); err != nil {
			return err
		}
		if len(c.Output) > api.MaxCommissionOutput {
			return invalidf("commissioning output of %s is %d bytes (at most %d: send its tail)", c.Script, len(c.Output), api.MaxCommissionOutput)
		}
		if !utf8.ValidString(c.Output) || strings.IndexByte(c.Output, 0) >= 0 {
			return invalidf("commissioning output of %s holds a NUL byte or invalid UTF-8", c.Script)
		}
	}
	return nil
}

// EnlistOptions bound what enlistment may create.
type EnlistOptions struct {
	// MaxNew is how many New machines the region may hold: a report that would create one
	// more is refused (ErrFull) until an operator commissions or deletes some. 0: no bound.
	MaxNew int
}

// Enlist records a booting machine's report (region/api/enlist.go): it creates a machine in
// the New state, or updates the one machine the report's identities match. A report whose
// identities belong to several machines, that contradicts the matched machine's stored
// identities, that matches a machine a migration holds or that is locked, or that brings an
// inventory for a machine already Ready, is refused with ErrConflict and an "enlist-refused"
// audit event; nothing else changes. A report that would create a machine past o.MaxNew is
// refused with ErrFull and no event: a storm of them must not become a storm of writes.
func (s *Store) Enlist(ctx context.Context, by Principal, e api.Enlistment, o EnlistOptions) (api.EnlistResult, error) {
	r, err := parseEnlistment(e)
	if err != nil {
		return api.EnlistResult{}, err
	}
	var res api.EnlistResult
	var refused error
	err = s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", enlistLock); err != nil {
			return err
		}
		owners, err := identityOwners(ctx, tx, r)
		if err != nil {
			return err
		}
		switch len(owners) {
		case 0:
			if err := roomForNew(ctx, tx, o.MaxNew); err != nil {
				return err
			}
			res, err = createEnlisted(ctx, tx, by, r)
			return err
		case 1:
			for id := range owners {
				res, refused, err = updateEnlisted(ctx, tx, by, r, id, owners[id].holds)
			}
		default:
			var id string
			if id, err = foldBootPlaceholder(ctx, tx, by, r, owners); err != nil {
				return err
			}
			if id == "" {
				refused = conflictf("the enlistment of %s is refused: its identities belong to %d machines (%s)", r.macs[0], len(owners), describeOwners(owners))
				break
			}
			res, refused, err = updateEnlisted(ctx, tx, by, r, id, owners[id].holds)
		}
		if err != nil || refused == nil {
			return err
		}
		return recordEvent(ctx, tx, by, "enlist-refused", api.KindMachines, r.macs[0], map[string]any{
			"Reason": refused.Error(), "MACs": r.macs, "Rack": rackOf(r)})
	})
	if err != nil {
		return api.EnlistResult{}, err
	}
	return res, refused
}

// foldBootPlaceholder resolves the one conflict a machine added by its BMC meets by design:
// powered on by its commissioning, it PXE-boots unknown by MAC, so iPXE's report creates a
// New placeholder, and its agent's report then names both the placeholder (by MAC, SMBIOS
// UUID or serial) and the machine being commissioned (by the BMC address alone). When the two
// owners are exactly such a pair, the placeholder (New, no inventory, unlocked, unheld,
// created by enlistment through the rack of the machine being commissioned) is deleted and
// the UUID of the machine being commissioned is returned, to take the report; otherwise "".
// It gives a report no more than its BMC claim already could: the commissioned machine's
// inventory, and pending MACs for an operator.
func foldBootPlaceholder(ctx context.Context, tx pgx.Tx, by Principal, r *report, owners map[string]*owner) (string, error) {
	if len(owners) != 2 {
		return "", nil
	}
	var commissioning, placeholder *api.Machine
	for id, o := range owners {
		row, err := machines.resolve(ctx, tx, id, true)
		if err != nil {
			return "", err
		}
		m := row.obj
		byBMC := !slices.ContainsFunc(o.holds, func(h string) bool { return !strings.HasPrefix(h, idBMC+" ") })
		switch {
		case m.Status == api.StatusCommissioning && byBMC:
			commissioning = m
		case m.Status == api.StatusNew && !byBMC && m.BMCAddress == "" && m.Enlisted != nil && m.Enlisted.Inventory == nil &&
			!m.Locked && m.Stage == api.EnlistStage && strings.HasPrefix(m.Name, "new-"):
			placeholder = m
		}
	}
	if commissioning == nil || placeholder == nil || placeholder.Rack != commissioning.Rack || rackOf(r) != "" && rackOf(r) != commissioning.Rack {
		return "", nil
	}
	if held, err := holder(ctx, tx, placeholder); err != nil || held != "" {
		return "", err
	}
	if err := machines.remove(ctx, tx, by, placeholder.Uuid, false); err != nil {
		return "", err
	}
	return commissioning.Uuid, recordEvent(ctx, tx, by, "enlist-folded", api.KindMachines, commissioning.Uuid,
		map[string]any{"Placeholder": placeholder.Uuid, "PlaceholderName": placeholder.Name, "MACs": r.macs})
}

func rackOf(r *report) string {
	if r.e.Boot != nil {
		return r.e.Boot.Rack
	}
	return ""
}

// owner is a machine holding some of a report's identities.
type owner struct {
	name  string
	holds []string // "MAC 52:54:…", "bmc 10.0.0.1"
}

// identityOwners maps each machine (by UUID) holding one of the report's identities to what
// it holds.
func identityOwners(ctx context.Context, tx pgx.Tx, r *report) (map[string]*owner, error) {
	var kinds, values []string
	for _, id := range r.identities() {
		kinds, values = append(kinds, id.kind), append(values, id.value)
	}
	rows, err := tx.Query(ctx, `
		SELECT held.machine, m.name, held.what FROM (
			SELECT machine, 'MAC ' || mac AS what FROM machine_macs WHERE mac = ANY($1::text[])
			UNION ALL
			SELECT mi.machine, mi.kind || ' ' || mi.value FROM machine_identities mi
				JOIN unnest($2::text[], $3::text[]) AS r(kind, value) ON (mi.kind, mi.value) = (r.kind, r.value)
		) held JOIN machines m ON m.uuid = held.machine
		ORDER BY 2, 3`, r.macs, kinds, values)
	if err != nil {
		return nil, err
	}
	owners := map[string]*owner{}
	var machine, name, what string
	_, err = pgx.ForEachRow(rows, []any{&machine, &name, &what}, func() error {
		if owners[machine] == nil {
			owners[machine] = &owner{name: name}
		}
		owners[machine].holds = append(owners[machine].holds, what)
		return nil
	})
	return owners, err
}

func describeOwners(owners map[string]*owner) string {
	var parts []string
	for _, id := range slices.SortedFunc(maps.Keys(owners), func(a, b string) int { return strings.Compare(owners[a].name, owners[b].name) }) {
		parts = append(parts, owners[id].name+" holds "+strings.Join(owners[id].holds, ", "))
	}
	return strings.Join(parts, "; ")
}

// roomForNew refuses (ErrFull) when the region holds maxNew New machines already.
func roomForNew(ctx context.Context, tx pgx.Tx, maxNew int) error {
	if maxNew <= 0 {
		return nil
	}
	var n int
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM machines WHERE doc->>'Status' = $1", api.StatusNew).Scan(&n); err != nil {
		return err
	}
	if n >= maxNew {
		return classed(ErrFull, "the region holds %d New machines, the most enlistment may create; commission or delete some (machines list Status=New)", n)
	}
	return nil
}

// createEnlisted creates the New machine of a report no machine matched.
func createEnlisted(ctx context.Context, tx pgx.Tx, by Principal, r *report) (api.EnlistResult, error) {
	secret, err := newToken()
	if err != nil {
		return api.EnlistResult{}, err
	}
	m := &api.Machine{
		Name:          "new-" + strings.ReplaceAll(r.macs[0], ":", ""),
		Description:   "Enlisted " + time.Now().UTC().Format(time.RFC3339),
		Arch:          r.arch,
		HardwareAddrs: r.macs,
		Fingerprint:   api.Fingerprint{SystemUUID: r.systemUUID, SSNHash: r.ssnHash},
		BMCAddress:    r.bmc,
		Stage:         api.EnlistStage,
		BootEnv:       api.EnlistStage,
		Status:        api.StatusNew,
		Runnable:      true,
		Available:     true,
		Validated:     true,
		Secret:        secret[:16],
		Pool:          "default",
		Rack:          rackOf(r),
		Enlisted:      &api.Enlisted{},
	}
	record(m, r)
	if err := machines.create(ctx, tx, by, m); err != nil {
		return api.EnlistResult{}, err
	}
	return api.EnlistResult{Machine: m.Uuid, Name: m.Name, Created: true, Status: m.Status},
		recordEvent(ctx, tx, by, "enlist", api.KindMachines, m.Uuid, map[string]any{"Created": true, "MACs": r.macs, "Rack": rackOf(r)})
}

// updateEnlisted records a report on the one machine it matched (holding matched), unless
// the machine cannot take it: refused is then the reason and nothing was written.
//
// Reports carry no credential, so none changes what a known machine is: the MACs and
// identities it lacks become pending (Enlisted.Pending) for an operator to accept, and never
// move its reservation (which follows its first MAC) or its address. A report through one of
// the machine's own MACs records its boot facts and inventory (and the rack, when the machine
// has none); one that matched by an identity alone (anybody on the machine network may claim
// a BMC address or a serial) only fills in what the machine has not recorded, never makes it
// Ready and never ties it to a rack (which a rack transfer would take it along with).
func updateEnlisted(ctx context.Context, tx pgx.Tx, by Principal, r *report, id string, matched []string) (res api.EnlistResult, refused, err error) {
	row, err := machines.resolve(ctx, tx, id, true)
	if err != nil {
		return res, nil, err
	}
	m, err := clone(row.obj)
	if err != nil {
		return res, nil, err
	}
	held, err := holder(ctx, tx, m)
	if err != nil {
		return res, nil, err
	}
	ownMAC := slices.ContainsFunc(r.macs, func(mac string) bool { return slices.Contains(m.HardwareAddrs, mac) })
	switch {
	case held != "":
		return res, conflictf("the enlistment of %s matches machine %s (%s), which migration %s holds", r.macs[0], m.Name, m.Uuid, held), nil
	case m.Locked:
		return res, conflictf("the enlistment of %s matches machine %s (%s), which is locked", r.macs[0], m.Name, m.Uuid), nil
	case ownMAC && r.e.Inventory != nil && m.Status == api.StatusReady:
		// What a commissioned machine is stays as recorded until an operator asks for it again.
		return res, conflictf("the enlistment of %s matches machine %s (%s), which is %s already; set its Status to %s to commission it again",
			r.macs[0], m.Name, m.Uuid, api.StatusReady, api.StatusNew), nil
	}
	stored := map[string]string{}
	for _, s := range machineIdentities(m) {
		stored[s.kind] = s.value
	}
	var claimed []identity // what the report says the machine is and the machine does not hold
	for _, rep := range r.identities() {
		v, ok := stored[rep.kind]
		if ok && v != rep.value {
			return res, conflictf("the enlistment of %s matches machine %s (%s) by %s but reports %s; the machine has %s",
				r.macs[0], m.Name, m.Uuid, strings.Join(matched, ", "), rep, identity{rep.kind, v}), nil
		}
		if !ok {
			claimed = append(claimed, rep)
		}
	}
	for _, mac := range r.macs {
		if !slices.Contains(m.HardwareAddrs, mac) {
			claimed = append(claimed, identity{api.IdentityMAC, mac})
		}
	}
	if m.Enlisted == nil {
		m.Enlisted = &api.Enlisted{}
	}
	pending := addPending(m.Enlisted.Pending, claimed, by.User)
	if len(pending) > api.MaxEnlistPending {
		return res, conflictf("the enlistment of %s matches machine %s (%s), which holds %d pending MACs and identities, the most it may; an operator accepts or clears them (Enlisted.Pending)",
			r.macs[0], m.Name, m.Uuid, len(m.Enlisted.Pending)), nil
	}
	m.Enlisted.Pending = pending
	if m.Arch == "" {
		m.Arch = r.arch
	}
	if m.Status == "" {
		m.Status = api.StatusNew
	}
	if ownMAC {
		if m.Rack == "" { // the rack it first booted through; a rack transfer takes it along
			m.Rack = rackOf(r)
		}
		record(m, r)
	} else {
		fillUnrecorded(m, r)
	}
	if _, err := updateMachine(ctx, tx, by, row, m); err != nil {
		return res, nil, err
	}
	return api.EnlistResult{Machine: m.Uuid, Name: m.Name, Status: m.Status},
		nil, recordEvent(ctx, tx, by, "enlist", api.KindMachines, m.Uuid, map[string]any{"Created": false, "MatchedBy": matched,
			"MACs": r.macs, "Rack": rackOf(r), "Pending": describeIdentities(claimed)})
}

// addPending returns pending with the claimed identities it lacks appended.
func addPending(pending []api.PendingIdentity, claimed []identity, by string) []api.PendingIdentity {
	now := time.Now().UTC()
	for _, c := range claimed {
		if !slices.ContainsFunc(pending, func(p api.PendingIdentity) bool { return p.Kind == c.kind && p.Value == c.value }) {
			pending = append(pending, api.PendingIdentity{Kind: c.kind, Value: c.value, By: by, Time: now})
		}
	}
	return pending
}

func describeIdentities(ids []identity) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.kind + " " + id.value
	}
	return out
}

// checkPending refuses pending identities an operator wrote that no report could have: an
// unknown kind, or more than a machine holds.
func checkPending(m *api.Machine) error {
	if m.Enlisted == nil {
		return nil
	}
	if n := len(m.Enlisted.Pending); n > api.MaxEnlistPending {
		return invalidf("machine %s has %d pending identities (at most %d)", m.Name, n, api.MaxEnlistPending)
	}
	for i, p := range m.Enlisted.Pending {
		if !slices.Contains([]string{api.IdentityMAC, idSystemUUID, idSerial, idBMC}, p.Kind) {
			return invalidf("machine %s Enlisted.Pending[%d] has kind %q, not one of %s, %s, %s, %s", m.Name, i, p.Kind, api.IdentityMAC, idSystemUUID, idSerial, idBMC)
		}
	}
	return nil
}

// dropAcceptedPending forgets the pending identities m now holds: an operator wrote them into
// the machine, accepting them.
func dropAcceptedPending(m *api.Machine) {
	if m.Enlisted == nil {
		return
	}
	holds := machineIdentities(m)
	for _, mac := range m.HardwareAddrs {
		holds = append(holds, identity{api.IdentityMAC, mac})
	}
	m.Enlisted.Pending = slices.DeleteFunc(m.Enlisted.Pending, func(p api.PendingIdentity) bool {
		return slices.Contains(holds, identity{p.Kind, strings.ToLower(p.Value)})
	})
	if len(m.Enlisted.Pending) == 0 {
		m.Enlisted.Pending = nil
	}
}

// record keeps the report on m: the latest boot facts, inventory and commissioning results
// (each replaces the earlier one); an inventory makes the machine Ready.
func record(m *api.Machine, r *report) {
	if r.e.Boot != nil {
		m.Enlisted.Boot = r.e.Boot
	}
	if r.e.Inventory != nil {
		m.Enlisted.Inventory = r.e.Inventory
		m.Enlisted.Commissioning = r.e.Commissioning
		m.Status = api.StatusReady
	}
	m.Enlisted.Time = time.Now().UTC()
}

// fillUnrecorded keeps what a report that matched m by an identity alone may: the boot facts
// and the inventory m has none of. It leaves the Status, so a report through one of m's own
// MACs still commissions it.
func fillUnrecorded(m *api.Machine, r *report) {
	if m.Enlisted.Boot == nil {
		m.Enlisted.Boot = r.e.Boot
	}
	if m.Enlisted.Inventory == nil && r.e.Inventory != nil {
		m.Enlisted.Inventory = r.e.Inventory
		m.Enlisted.Commissioning = r.e.Commissioning
	}
	m.Enlisted.Time = time.Now().UTC()
}
