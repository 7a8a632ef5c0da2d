-- Rack transfer: the objects imports of a rack created on this region (so the transfer's
-- compensation deletes exactly those), and the origin of pending operations handed over
-- from another region with a rack (stored once however often the hand-over is retried).

CREATE TABLE rack_imports (
    seq  bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    rack uuid NOT NULL,
    kind text NOT NULL,
    key  uuid NOT NULL,
    PRIMARY KEY (rack, kind, key)
);

ALTER TABLE pending_operations ADD COLUMN origin text CONSTRAINT pending_operations_origin_key UNIQUE;
