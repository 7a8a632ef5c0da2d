-- The shared secret rack controllers register with, minted once per region when the
-- configuration gives none (IRONFLOW_RACK_SECRET).
CREATE TABLE rack_secret (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    secret    text NOT NULL
);
