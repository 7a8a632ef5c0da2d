-- A machine's recent syslog moves with it (store/syslog_moves.go). origin is the identity a
-- message got where it was first stored and keeps on every region it moves to, so a copy
-- imported again, or a machine coming back, stores each message once. import_ticket is the
-- ticket of the import that added the message here (NULL: received here), so the undo of
-- that import removes exactly what it added. Existing messages each get their own origin.
ALTER TABLE syslog ADD COLUMN origin uuid NOT NULL DEFAULT gen_random_uuid();
ALTER TABLE syslog ADD COLUMN import_ticket text;
CREATE UNIQUE INDEX syslog_machine_origin ON syslog (machine, origin);
