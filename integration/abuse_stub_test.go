package integration

import "testing"

func abuseBodies(t *testing.T, s *abuseStack)    {}
func abuseLimits(t *testing.T, s *abuseStack)    {}
func abuseRegionDNS(t *testing.T, s *abuseStack) {}
func abuseRack(t *testing.T, s *abuseStack)      {}
