-- Enlistment's cap on New machines (store/enlist.go, EnlistOptions.MaxNew) counts them under
-- the enlistment lock before every machine a report creates: this index keeps that count
-- to the New machines instead of a scan of every machine.
CREATE INDEX machines_status_new ON machines (uuid) WHERE doc->>'Status' = 'New';
