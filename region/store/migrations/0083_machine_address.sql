-- A machine's Address is unique in the region (region/store/machines.go, addressFree): the
-- check of every write that sets one looks it up here instead of reading every machine.
CREATE INDEX machines_address ON machines ((doc->>'Address')) WHERE doc->>'Address' <> '';
