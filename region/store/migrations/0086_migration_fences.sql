-- The newest attempt of a batch activity that acted on a machine, for its migration
-- (store/fences.go): a step of that migration from an older attempt is refused, so an attempt
-- the Temporal server timed out cannot change a machine its retry moved on. One row per
-- machine, replaced by the first fenced step of the machine's next migration; it outlives the
-- hold on purpose, since a stale step lands after the newer attempt ended the hold (activated
-- the copy, undid the quiesce). No foreign key: a stale import must find the fence of a copy
-- the newer attempt deleted. attempt_started is in unix nanoseconds.
CREATE TABLE migration_fences (
	machine uuid PRIMARY KEY,
	migration text NOT NULL,
	attempt_started bigint NOT NULL,
	attempt integer NOT NULL,
	seen_at timestamptz NOT NULL DEFAULT now()
);
