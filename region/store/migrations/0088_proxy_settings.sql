-- The region's settings of its racks' HTTP proxy for machines (api.RackProxy): one row, absent
-- until an operator sets them (the defaults). They are part of every rack's config.
CREATE TABLE proxy_settings (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    doc       jsonb NOT NULL
);
CREATE CONSTRAINT TRIGGER rack_config_proxy_settings AFTER INSERT OR UPDATE OR DELETE ON proxy_settings
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION bump_rack_config_revision('static');
