-- Ordinary API writes that touch a paused rack are queued as pending operations of kind
-- 'write' (region/server/queue.go) and replayed once the rack's pause ends on the region that
-- owns it. done is when the write was settled here: replayed (outcome 'applied' or its error),
-- or handed over to the rack's new region (outcome 'handed over'); a settled write is never
-- replayed again. Operations of other kinds keep done NULL.
ALTER TABLE pending_operations ADD COLUMN done timestamptz;
ALTER TABLE pending_operations ADD COLUMN outcome text NOT NULL DEFAULT '';
