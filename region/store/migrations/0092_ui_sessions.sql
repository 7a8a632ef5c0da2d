-- Sessions of the web UI (store/uisessions.go). A session is tied to the API token it was
-- signed in with, so revoking or expiring the token ends the session; only hashes are kept.
CREATE TABLE ui_sessions (
    hash       bytea PRIMARY KEY CHECK (length(hash) = 32),
    token_hash bytea NOT NULL REFERENCES tokens (hash) ON DELETE CASCADE,
    csrf       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX ui_sessions_token ON ui_sessions (token_hash);
CREATE INDEX ui_sessions_expires ON ui_sessions (expires_at);
