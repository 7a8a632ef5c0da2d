package integration

import "testing"

func abuseRegionDNS(t *testing.T, s *abuseStack) {}
func abuseRack(t *testing.T, s *abuseStack)      {}
