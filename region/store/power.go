package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

// Machine power (region/api/power.go). The driver, BMC address and user live in the machine's
// doc (Power), written only here: the generic machine writes keep the stored Power
// (keepPower). The BMC password is the machine secret api.PowerPasswordSecret, which only an
// operator, an admin and the machine's own rack read; audit events say whether it changed,
// never what it is.

// keepPower is the machines' prepare hook: a machine PUT or PATCH (or a create) cannot set
// Power, whose only writers are SetPower and the rack's ReportPower.
func keepPower(m, old *api.Machine) {
	if old == nil {
		m.Power = nil
		return
	}
	m.Power = old.Power
}

// bmcLock is the first key of the advisory locks that serialise the writes giving a machine a
// BMC address ("bmc "); the second is the hash of the address.
const bmcLock int32 = 0x626d6320

// SetPower sets the power driver of the machine at key, and its BMC password when cfg has one.
// An IPMI driver needs an address (host[:port], unique in the region), a user and a password
// (given now or stored before); manual needs none, and setting it drops the stored password.
func (s *Store) SetPower(ctx context.Context, by Principal, key string, cfg api.PowerConfig) (api.Machine, error) {
	var out api.Machine
	err := s.tx(ctx, func(tx pgx.Tx) error {
		r, err := machines.resolve(ctx, tx, key, true)
		if err != nil {
			return err
		}
		m := r.obj
		if isStub(m) {
			return conflictf("machine %s (%s) migrated to %s; set its power there", m.Name, m.Uuid, m.Meta[api.MetaRedirectEndpoint])
		}
		info, err := powerInfoOf(m, cfg)
		if err != nil {
			return err
		}
		if info.Type == api.PowerTypeIPMI {
			if err := bmcFree(ctx, tx, m, info.Address); err != nil {
				return err
			}
			if err := needPassword(ctx, tx, m, cfg.Password); err != nil {
				return err
			}
		}
		changed := false
		switch {
		case info.Type == api.PowerTypeManual:
			tag, err := tx.Exec(ctx, "DELETE FROM machine_secrets WHERE machine = $1 AND name = $2", m.Uuid, api.PowerPasswordSecret)
			if err != nil {
				return err
			}
			changed = tag.RowsAffected() > 0
		case cfg.Password != "":
			if err := validSecret(api.PowerPasswordSecret, cfg.Password); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO machine_secrets (machine, name, value) VALUES ($1, $2, $3)
				ON CONFLICT (machine, name) DO UPDATE SET value = excluded.value`, m.Uuid, api.PowerPasswordSecret, cfg.Password); err != nil {
				return err
			}
			changed = true
		}
		if err := writePower(ctx, tx, m, info); err != nil {
			return err
		}
		out = *m
		return recordEvent(ctx, tx, by, "set-power", api.KindMachines, m.Uuid, map[string]any{
			"Type": info.Type, "Address": info.Address, "User": info.User, "PasswordChanged": changed})
	})
	return out, err
}

// powerInfoOf checks cfg for machine m and returns the Power it sets: a new driver's state is
// unknown until the rack checks it; the same BMC keeps what the rack saw.
func powerInfoOf(m *api.Machine, cfg api.PowerConfig) (api.PowerInfo, error) {
	info := api.PowerInfo{Type: strings.TrimSpace(cfg.Type), User: cfg.User, State: api.PowerStateUnknown}
	switch info.Type {
	case api.PowerTypeIPMI:
		addr, err := api.CanonBMCAddress(cfg.Address, api.DefaultIPMIPort)
		if err != nil {
			return info, invalidf("machine %s: %v", m.Name, err)
		}
		info.Address = addr
		if strings.TrimSpace(cfg.User) == "" || strings.ContainsFunc(cfg.User, isControl) {
			return info, invalidf("machine %s: an ipmi power driver needs the BMC User (no control characters)", m.Name)
		}
	case api.PowerTypeManual:
		if cfg.Address != "" || cfg.User != "" || cfg.Password != "" {
			return info, invalidf("machine %s: a manual power driver takes no Address, User or Password", m.Name)
		}
		info.User = ""
	case api.PowerTypeVirsh:
		return info, invalidf("machine %s: power type virsh is a pod VM's own (a machine composed on a pod has it); set one of %s",
			m.Name, strings.Join(api.PowerTypes, ", "))
	default:
		return info, invalidf("machine %s: unknown power type %q: want one of %s", m.Name, cfg.Type, strings.Join(api.PowerTypes, ", "))
	}
	if old := m.Power; old != nil && old.Type == info.Type && old.Address == info.Address {
		info.State, info.CheckedAt, info.LastError = old.State, old.CheckedAt, old.LastError
	}
	return info, nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// bmcFree refuses to give machine m a BMC address another machine's power driver uses: a power
// action on one would power the other. Concurrent writes of one address wait for each other.
func bmcFree(ctx context.Context, tx pgx.Tx, m *api.Machine, addr string) error {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext($2))", bmcLock, addr); err != nil {
		return err
	}
	var holder, holderUUID string
	held, err := queryFirst(ctx, tx,
		"SELECT name, uuid::text FROM machines WHERE doc->'Power'->>'Address' = $1 AND doc->'Power'->>'Address' <> '' AND uuid <> $2::uuid LIMIT 1",
		[]any{addr, m.Uuid}, &holder, &holderUUID)
	if !held {
		return err
	}
	return conflictf("machine %s: BMC %s is already the power address of machine %s (%s): a BMC powers one machine", m.Name, addr, holder, holderUUID)
}

// needPassword refuses an IPMI driver without a password, given or stored.
func needPassword(ctx context.Context, tx pgx.Tx, m *api.Machine, given string) error {
	if given != "" {
		return nil
	}
	var n int
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM machine_secrets WHERE machine = $1 AND name = $2", m.Uuid, api.PowerPasswordSecret).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return invalidf("machine %s: an ipmi power driver needs the BMC Password", m.Name)
	}
	return nil
}

// writePower stores info as m's Power, in m too.
func writePower(ctx context.Context, tx pgx.Tx, m *api.Machine, info api.PowerInfo) error {
	doc, err := json.Marshal(info)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "UPDATE machines SET doc = jsonb_set(doc, '{Power}', $2::jsonb) WHERE uuid = $1::uuid", m.Uuid, doc); err != nil {
		return err
	}
	m.Power = &info
	return nil
}

// rackMachine resolves the machine at key for rack and refuses one the rack does not serve
// (Machine.Rack), so a rack reaches its own machines' BMCs only.
func rackMachine(ctx context.Context, tx pgx.Tx, rack, key string, lock bool) (*api.Machine, error) {
	r, err := machines.resolve(ctx, tx, key, lock)
	if err != nil {
		return nil, err
	}
	if r.obj.Rack != rack {
		return nil, classed(ErrForbidden, "machine %s is not a machine of rack %s", r.obj.Name, rack)
	}
	return r.obj, nil
}

// PowerCredential returns what rack needs to drive the BMC of its machine at key, password
// included; a machine of another rack is refused.
func (s *Store) PowerCredential(ctx context.Context, rack, key string) (api.PowerCredential, error) {
	var cred api.PowerCredential
	err := s.tx(ctx, func(tx pgx.Tx) error {
		m, err := rackMachine(ctx, tx, rack, key, false)
		if err != nil {
			return err
		}
		if m.Power == nil || m.Power.Type == "" {
			return notFoundf("machine %s has no power driver: set one with `ironflow machines set-power %s --power-type ipmi …`", m.Name, m.Name)
		}
		cred = api.PowerCredential{Machine: m.Uuid, Type: m.Power.Type, Address: m.Power.Address, User: m.Power.User}
		if m.Power.Type != api.PowerTypeIPMI {
			return nil
		}
		err = tx.QueryRow(ctx, "SELECT value FROM machine_secrets WHERE machine = $1 AND name = $2", m.Uuid, api.PowerPasswordSecret).Scan(&cred.Password)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFoundf("machine %s has no BMC password: set it with `ironflow machines set-power`", m.Name)
		}
		return err
	})
	return cred, err
}

// maxPowerError bounds the LastError a rack stores (a BMC's message, quoted in it).
const maxPowerError = 1024

// ReportPower stores what rack saw of its machine at key's power (state, time, error) and, for
// an action, audits it: the action, its result and who asked.
func (s *Store) ReportPower(ctx context.Context, by Principal, rack, key string, rep api.PowerReport) (api.Machine, error) {
	if err := api.ValidPowerStatus(rep.State); err != nil {
		return api.Machine{}, invalidf("%v", err)
	}
	if rep.Action != "" {
		if _, err := api.ParsePowerRequest(string(rep.Action)); err != nil {
			return api.Machine{}, invalidf("%v", err)
		}
	}
	if len(rep.Error) > maxPowerError || strings.ContainsFunc(rep.Error, isControl) {
		return api.Machine{}, invalidf("power report Error is longer than %d bytes or holds control characters", maxPowerError)
	}
	var out api.Machine
	err := s.tx(ctx, func(tx pgx.Tx) error {
		m, err := rackMachine(ctx, tx, rack, key, true)
		if err != nil {
			return err
		}
		info := api.PowerInfo{Type: api.PowerTypeVirsh} // a pod VM's, which its pod's libvirt powers
		switch {
		case m.Power != nil && m.Power.Type != "":
			info = *m.Power
		case m.Pod == "":
			return conflictf("machine %s has no power driver: nothing to report", m.Name)
		}
		now := time.Now().UTC().Truncate(time.Millisecond)
		info.State, info.CheckedAt, info.LastError = rep.State, &now, rep.Error
		if err := writePower(ctx, tx, m, info); err != nil {
			return err
		}
		out = *m
		if rep.Action == "" {
			return nil // a poll: the machine shows it, the audit log records actions
		}
		result := "ok"
		if rep.Error != "" {
			result = "failed"
		} else if info.Type == api.PowerTypeManual && rep.Action != api.PowerStatusAction {
			result = "needs-operator"
		}
		details := map[string]any{"Action": string(rep.Action), "Result": result, "State": string(rep.State),
			"RequestedBy": rep.RequestedBy, "Workflow": rep.Workflow, "BMC": info.Address}
		if rep.Error != "" {
			details["Error"] = rep.Error
		}
		return recordEvent(ctx, tx, by, "power-"+string(rep.Action), api.KindMachines, m.Uuid, details)
	})
	return out, err
}

// PowerHold names the migration that holds the machine at key ("" when none): a power action
// on it would act on a machine that is changing region.
func (s *Store) PowerHold(ctx context.Context, key string) (api.Machine, string, error) {
	r, err := machines.resolve(ctx, s.pool, key, false)
	if err != nil {
		return api.Machine{}, "", classify(err)
	}
	id, err := holder(ctx, s.pool, r.obj)
	return *r.obj, id, classify(err)
}
