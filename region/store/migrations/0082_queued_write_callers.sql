-- Who queued an operation is recorded by the region from the authenticated caller
-- (queued_by, queued_role), never read from its payload: the payload of a queued write is
-- its method, path, query and body only. Rows queued before this migration take the actor
-- of their "queue" audit event, which the region recorded from the caller's token; the
-- payload's role counts only when the payload names that same user (the replay narrows it
-- to the user's role of the moment anyway). A row with no such event (handed over from
-- another region) keeps no caller, and its replay is refused.
ALTER TABLE pending_operations ADD COLUMN queued_by text NOT NULL DEFAULT '';
ALTER TABLE pending_operations ADD COLUMN queued_role text NOT NULL DEFAULT '';
UPDATE pending_operations p SET queued_by = e.actor,
    queued_role = CASE WHEN p.payload->>'User' = e.actor THEN coalesce(p.payload->>'Role', '') ELSE '' END
    FROM events e
    WHERE e.kind = 'operations' AND e.action = 'queue' AND e.key = p.target::text AND e.details->>'ID' = p.id::text;
UPDATE pending_operations SET payload = payload - 'User' - 'Role' WHERE kind = 'write';

-- A write's replay is settled in the transaction of its effect (its idempotency key is its
-- ID), so a replay cut short is run again. Writes left 'replaying' by the earlier
-- at-most-once replay may or may not have run: they stay settled, and say so.
UPDATE pending_operations SET outcome = 'interrupted: the region stopped while replaying it, before replays could be retried; it may or may not have been applied'
    WHERE kind = 'write' AND outcome = 'replaying';

-- The replay lists, and the queue's caps count, the writes not settled yet.
CREATE INDEX pending_operations_unsettled_writes ON pending_operations (target) WHERE kind = 'write' AND done IS NULL;
