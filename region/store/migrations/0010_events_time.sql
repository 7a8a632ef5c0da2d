-- Audit retention deletes events by age.
CREATE INDEX events_time ON events (time);
