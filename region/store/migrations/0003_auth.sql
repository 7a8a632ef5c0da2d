-- Users, API tokens (SHA-256 hashes only) and single-use migrate tickets.

CREATE TABLE users (
    seq  bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    name text PRIMARY KEY,
    role text NOT NULL CHECK (role IN ('admin', 'operator', 'readonly', 'rack', 'machine')),
    doc  jsonb NOT NULL
);

CREATE TABLE tokens (
    hash       bytea PRIMARY KEY CHECK (length(hash) = 32),
    "user"     text NOT NULL REFERENCES users (name) ON DELETE CASCADE,
    role       text NOT NULL CHECK (role IN ('admin', 'operator', 'readonly', 'rack', 'machine')),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz
);
CREATE INDEX tokens_user ON tokens ("user");

CREATE TABLE tickets (
    jti        text PRIMARY KEY,
    expires_at timestamptz NOT NULL,
    used_at    timestamptz
);
