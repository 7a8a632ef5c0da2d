-- A machine's BMC is its own (region/store/power.go, bmcFree): two machines with one BMC
-- address would power each other. The check of SetPower looks the address up here and names the
-- holder; the unique index stops two concurrent writes that both found it free.
CREATE UNIQUE INDEX machines_power_address ON machines ((doc->'Power'->>'Address'))
    WHERE doc->'Power'->>'Address' <> '';
