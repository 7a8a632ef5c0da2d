package integration

import "testing"

func abuseLimits(t *testing.T, s *abuseStack)    {}
func abuseRegionDNS(t *testing.T, s *abuseStack) {}
func abuseRack(t *testing.T, s *abuseStack)      {}
